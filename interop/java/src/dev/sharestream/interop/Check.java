package dev.sharestream.interop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.FeatureUpdate;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.UpdateFeaturesOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Interoperability checks with Apache Kafka's Java clients.
 *
 * <p>Each command runs one client scenario against {@code --bootstrap} and
 * prints exactly one line starting with {@code RESULT } followed by a JSON
 * object. The Rust suite (tests/suite/interop_embedded.rs) parses that line and
 * asserts on its fields. A scenario that throws prints
 * {@code RESULT {"ok":false,"error":...}} and exits with status 1.
 */
public final class Check {
    private Check() {}

    /** Command-line options: {@code --name value} pairs and bare flags. */
    static final class Opts {
        final Map<String, String> values = new HashMap<>();

        Opts(String[] args, int from) {
            for (int i = from; i < args.length; i++) {
                String a = args[i];
                if (!a.startsWith("--")) {
                    throw new IllegalArgumentException("unexpected argument " + a);
                }
                String name = a.substring(2);
                if (i + 1 < args.length && !args[i + 1].startsWith("--")) {
                    values.put(name, args[++i]);
                } else {
                    values.put(name, "true");
                }
            }
        }

        String str(String name) {
            String v = values.get(name);
            if (v == null) {
                throw new IllegalArgumentException("missing --" + name);
            }
            return v;
        }

        String str(String name, String dflt) {
            return values.getOrDefault(name, dflt);
        }

        int num(String name, int dflt) {
            String v = values.get(name);
            return v == null ? dflt : Integer.parseInt(v);
        }

        boolean flag(String name) {
            return values.containsKey(name);
        }
    }

    /** A tiny JSON object writer (flat values, string lists). */
    static final class Json {
        private final Map<String, Object> fields = new LinkedHashMap<>();

        Json put(String k, Object v) {
            fields.put(k, v);
            return this;
        }

        static String quote(String s) {
            StringBuilder b = new StringBuilder("\"");
            for (char c : s.toCharArray()) {
                switch (c) {
                    case '"': b.append("\\\""); break;
                    case '\\': b.append("\\\\"); break;
                    case '\n': b.append("\\n"); break;
                    case '\r': b.append("\\r"); break;
                    case '\t': b.append("\\t"); break;
                    default:
                        if (c < 0x20) {
                            b.append(String.format("\\u%04x", (int) c));
                        } else {
                            b.append(c);
                        }
                }
            }
            return b.append('"').toString();
        }

        static String value(Object v) {
            if (v == null) {
                return "null";
            }
            if (v instanceof Number || v instanceof Boolean) {
                return v.toString();
            }
            if (v instanceof Collection) {
                StringBuilder b = new StringBuilder("[");
                boolean first = true;
                for (Object o : (Collection<?>) v) {
                    if (!first) {
                        b.append(',');
                    }
                    first = false;
                    b.append(value(o));
                }
                return b.append(']').toString();
            }
            if (v instanceof Map) {
                StringBuilder b = new StringBuilder("{");
                boolean first = true;
                for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                    if (!first) {
                        b.append(',');
                    }
                    first = false;
                    b.append(quote(String.valueOf(e.getKey()))).append(':').append(value(e.getValue()));
                }
                return b.append('}').toString();
            }
            return quote(v.toString());
        }

        @Override
        public String toString() {
            return value(fields);
        }
    }

    public static void main(String[] args) {
        if (args.length == 0) {
            System.err.println("usage: Check <admin|produce-idempotent|produce-txn|consume|consume-pair|eos-copy|share-consume|share-dlq> --bootstrap HOST:PORT ...");
            System.exit(2);
        }
        String cmd = args[0];
        Json out = new Json().put("check", cmd);
        int status = 0;
        try {
            Opts o = new Opts(args, 1);
            switch (cmd) {
                case "admin": admin(o, out); break;
                case "produce-idempotent": produceIdempotent(o, out); break;
                case "produce-txn": produceTxn(o, out); break;
                case "consume": consume(o, out); break;
                case "consume-pair": consumePair(o, out); break;
                case "eos-copy": eosCopy(o, out); break;
                case "share-consume": shareConsume(o, out); break;
                case "share-dlq": shareDlq(o, out); break;
                case "scram-users": scramUsers(o, out); break;
                case "client-quotas": clientQuotas(o, out); break;
                case "mutation-quota": mutationQuota(o, out); break;
                case "log-dirs": logDirs(o, out); break;
                case "leader-epoch": leaderEpoch(o, out); break;
                case "reassign-elect": reassignElect(o, out); break;
                case "group-configs": groupConfigs(o, out); break;
                default: throw new IllegalArgumentException("unknown command " + cmd);
            }
            out.put("ok", true);
        } catch (Throwable t) {
            status = failed(out, t);
        }
        finish(out, status);
    }

    /** Records a scenario's failure in {@code out} (the root cause, past ExecutionException); the exit status. */
    static int failed(Json out, Throwable t) {
        Throwable root = t;
        while (root instanceof ExecutionException && root.getCause() != null) {
            root = root.getCause();
        }
        out.put("ok", false).put("error", root.getClass().getSimpleName() + ": " + root.getMessage());
        t.printStackTrace();
        return 1;
    }

    /** Prints the RESULT line and exits with {@code status}. */
    static void finish(Json out, int status) {
        System.out.println("RESULT " + out);
        System.out.flush();
        System.exit(status);
    }

    static Properties base(Opts o) {
        Properties p = new Properties();
        p.put("bootstrap.servers", o.str("bootstrap"));
        // Fail fast instead of hanging: every scenario is bounded.
        p.put("request.timeout.ms", "15000");
        p.put("default.api.timeout.ms", "20000");
        String extra = o.str("props", "");
        for (String kv : extra.split(",")) {
            int eq = kv.indexOf('=');
            if (eq > 0) {
                p.put(kv.substring(0, eq), kv.substring(eq + 1));
            }
        }
        return p;
    }

    /** Admin: create a topic, describe the cluster, the topic and its configs. */
    static void admin(Opts o, Json out) throws Exception {
        String topic = o.str("topic");
        int partitions = o.num("partitions", 3);
        try (Admin admin = Admin.create(base(o))) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get(30, TimeUnit.SECONDS);
            out.put("created", true);
            DescribeClusterResult cluster = admin.describeCluster();
            Collection<Node> nodes = cluster.nodes().get(30, TimeUnit.SECONDS);
            Node controller = cluster.controller().get(30, TimeUnit.SECONDS);
            out.put("cluster_id", cluster.clusterId().get(30, TimeUnit.SECONDS));
            out.put("nodes", nodes.size());
            out.put("controller", controller == null ? -1 : controller.id());
            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS).get(topic);
            out.put("partitions", d.partitions().size());
            out.put("topic_id_set", d.topicId() != null && !d.topicId().equals(org.apache.kafka.common.Uuid.ZERO_UUID));
            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Config cfg = admin.describeConfigs(List.of(res)).all().get(30, TimeUnit.SECONDS).get(res);
            out.put("topic_configs", cfg.entries().size());
            ConfigEntry cleanup = cfg.get("cleanup.policy");
            out.put("cleanup_policy", cleanup == null ? null : cleanup.value());
            ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, String.valueOf(nodes.iterator().next().id()));
            Config bcfg = admin.describeConfigs(List.of(broker)).all().get(30, TimeUnit.SECONDS).get(broker);
            out.put("broker_configs", bcfg.entries().size());
            out.put("topics_listed", admin.listTopics().names().get(30, TimeUnit.SECONDS).contains(topic));
            if (o.flag("delete")) {
                admin.deleteTopics(List.of(topic)).all().get(30, TimeUnit.SECONDS);
                out.put("deleted", true);
            }
        }
    }

    static KafkaProducer<String, String> producer(Opts o, Properties p) {
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        p.putIfAbsent(ProducerConfig.LINGER_MS_CONFIG, "5");
        return new KafkaProducer<>(p);
    }

    /** Idempotent producer: N records, acks=all, offsets strictly increasing per partition. */
    static void produceIdempotent(Opts o, Json out) throws Exception {
        String topic = o.str("topic");
        int count = o.num("count", 100);
        Properties p = base(o);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "5");
        try (KafkaProducer<String, String> producer = producer(o, p)) {
            List<java.util.concurrent.Future<RecordMetadata>> futures = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                futures.add(producer.send(new ProducerRecord<>(topic, "k" + (i % 7), o.str("prefix", "idem") + "-" + i)));
            }
            producer.flush();
            Map<Integer, Long> last = new HashMap<>();
            int acked = 0;
            boolean increasing = true;
            for (java.util.concurrent.Future<RecordMetadata> f : futures) {
                RecordMetadata m = f.get(30, TimeUnit.SECONDS);
                Long prev = last.put(m.partition(), m.offset());
                if (prev != null && m.offset() <= prev) {
                    increasing = false;
                }
                acked++;
            }
            out.put("sent", count).put("acked", acked).put("offsets_increasing", increasing);
            out.put("partitions_written", last.size());
        }
    }

    /** Transactional producer: one transaction of N records, committed or aborted. */
    static void produceTxn(Opts o, Json out) throws Exception {
        String topic = o.str("topic");
        int count = o.num("count", 10);
        int transactions = o.num("transactions", 1);
        boolean commit = !o.flag("abort");
        Properties p = base(o);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, o.str("txn-id"));
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "60000");
        try (KafkaProducer<String, String> producer = producer(o, p)) {
            producer.initTransactions();
            out.put("init", true);
            int sent = 0;
            for (int t = 0; t < transactions; t++) {
                producer.beginTransaction();
                for (int i = 0; i < count; i++) {
                    producer.send(new ProducerRecord<>(topic, "k" + i, o.str("prefix", commit ? "committed" : "aborted") + "-" + t + "-" + i));
                    sent++;
                }
                producer.flush();
                if (commit) {
                    producer.commitTransaction();
                } else {
                    producer.abortTransaction();
                }
            }
            out.put("sent", sent).put("outcome", commit ? "commit" : "abort").put("transactions", transactions);
        }
    }

    /**
     * Consume-transform-produce with a consumer group: each polled batch is
     * copied to {@code --out} and its offsets committed with
     * {@code sendOffsetsToTransaction} (TxnOffsetCommit), in one transaction.
     * A second consumer of the group then finds nothing left.
     */
    static void eosCopy(Opts o, Json out) throws Exception {
        String topic = o.str("topic");
        String group = o.str("group");
        int expect = o.num("expect", 0);
        long deadline = System.currentTimeMillis() + o.num("timeout-ms", 30000);
        Properties cp = base(o);
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        Properties pp = base(o);
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, o.str("txn-id", "interop-eos"));
        int copied = 0;
        int transactions = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp);
             KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            producer.initTransactions();
            consumer.subscribe(List.of(topic));
            while (copied < expect && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> recs = consumer.poll(Duration.ofMillis(300));
                if (recs.isEmpty()) {
                    continue;
                }
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<String, String> r : recs) {
                    producer.send(new ProducerRecord<>(o.str("out"), r.key(), r.value()));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    copied++;
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                producer.commitTransaction();
                transactions++;
            }
        }
        out.put("copied", copied).put("transactions", transactions);
        try (Admin admin = Admin.create(base(o))) {
            Map<TopicPartition, OffsetAndMetadata> committed =
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
            out.put("committed_partitions", committed.size());
        }
        int again = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp)) {
            consumer.subscribe(List.of(topic));
            long until = System.currentTimeMillis() + 6000;
            while (System.currentTimeMillis() < until) {
                again += consumer.poll(Duration.ofMillis(300)).count();
            }
        }
        out.put("after_commit", again);
    }

    /** KafkaConsumer in assign mode (no consumer group): reads from the beginning. */
    static void consume(Opts o, Json out) throws Exception {
        String topic = o.str("topic");
        int expect = o.num("expect", 0);
        long deadline = System.currentTimeMillis() + o.num("timeout-ms", 20000);
        Properties p = base(o);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, o.str("isolation", "read_committed"));
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        if (o.flag("group")) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, o.str("group"));
        }
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = new ArrayList<>();
            if (o.flag("group")) {
                consumer.subscribe(List.of(topic));
                out.put("mode", "subscribe");
            } else {
                for (PartitionInfo pi : consumer.partitionsFor(topic, Duration.ofSeconds(20))) {
                    tps.add(new TopicPartition(topic, pi.partition()));
                }
                consumer.assign(tps);
                consumer.seekToBeginning(tps);
                out.put("mode", "assign");
            }
            List<String> values = new ArrayList<>();
            while (System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> recs = consumer.poll(Duration.ofMillis(300));
                for (ConsumerRecord<String, String> r : recs) {
                    values.add(r.value());
                }
                if (expect > 0 && values.size() >= expect) {
                    // One more poll so that over-delivery would show.
                    for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                        values.add(r.value());
                    }
                    break;
                }
            }
            Map<String, Integer> prefixes = new LinkedHashMap<>();
            for (String v : values) {
                int dash = v.indexOf('-');
                prefixes.merge(dash < 0 ? v : v.substring(0, dash), 1, Integer::sum);
            }
            out.put("received", values.size()).put("by_prefix", prefixes);
            if (!tps.isEmpty()) {
                long end = 0;
                for (Map.Entry<TopicPartition, Long> e : consumer.endOffsets(tps).entrySet()) {
                    end += e.getValue();
                }
                long pos = 0;
                for (TopicPartition tp : tps) {
                    pos += consumer.position(tp);
                }
                out.put("end_offsets_sum", end).put("positions_sum", pos);
            }
        }
    }

    /**
     * Two KafkaConsumers of one group ({@code --props} picks the protocol,
     * e.g. {@code group.protocol=consumer}) subscribe to {@code --topic}:
     * both must get partitions, never the same one at once, and together
     * all of them; then the second closes (leaves) and the first must end
     * up with every partition. Records are counted by value (each commit
     * is synchronous), so a record read twice after the move shows as
     * {@code received - distinct}.
     */
    static void consumePair(Opts o, Json out) throws Exception {
        String topic = o.str("topic");
        int expect = o.num("expect", 0);
        long deadline = System.currentTimeMillis() + o.num("timeout-ms", 30000);
        Properties p = base(o);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.GROUP_ID_CONFIG, o.str("group"));
        int partitions;
        List<String> values = new ArrayList<>();
        long start = System.currentTimeMillis();
        try (KafkaConsumer<String, String> c1 = new KafkaConsumer<>(p)) {
            partitions = c1.partitionsFor(topic, Duration.ofSeconds(20)).size();
            c1.subscribe(List.of(topic));
            boolean paired = false;
            boolean overlap = false;
            int commitsRefused = 0;
            try (KafkaConsumer<String, String> c2 = new KafkaConsumer<>(p)) {
                c2.subscribe(List.of(topic));
                while (System.currentTimeMillis() < deadline) {
                    for (KafkaConsumer<String, String> c : List.of(c1, c2)) {
                        for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                            values.add(r.value());
                        }
                        if (!c.assignment().isEmpty()) {
                            try {
                                c.commitSync();
                            } catch (org.apache.kafka.clients.consumer.CommitFailedException e) {
                                // KIP-848: a commit sent with the member epoch that a
                                // heartbeat has just bumped (the other member joined)
                                // is refused with STALE_MEMBER_EPOCH, by Kafka's broker
                                // too; KafkaConsumer documents this exception during a
                                // reassignment. The next round commits again; records
                                // read twice show as received - distinct.
                                commitsRefused++;
                            }
                        }
                    }
                    java.util.Set<TopicPartition> both = new java.util.HashSet<>(c1.assignment());
                    both.retainAll(c2.assignment());
                    overlap |= !both.isEmpty();
                    if (!c1.assignment().isEmpty() && !c2.assignment().isEmpty()
                            && c1.assignment().size() + c2.assignment().size() == partitions) {
                        if (!paired) {
                            // From the first subscribe to both members owning their share.
                            out.put("ms_to_pair", System.currentTimeMillis() - start);
                        }
                        paired = true;
                        if (expect == 0 || new java.util.HashSet<>(values).size() >= expect) {
                            break;
                        }
                    }
                }
                out.put("paired", paired).put("overlap", overlap)
                    .put("commits_refused_in_reassignment", commitsRefused)
                    .put("c1_partitions", c1.assignment().size())
                    .put("c2_partitions", c2.assignment().size());
            }
            // c2 left: c1 must take everything.
            long left = System.currentTimeMillis();
            int alone = 0;
            while (System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c1.poll(Duration.ofMillis(200))) {
                    values.add(r.value());
                }
                alone = c1.assignment().size();
                if (alone == partitions) {
                    break;
                }
            }
            out.put("after_leave_partitions", alone).put("partitions", partitions)
                .put("ms_to_take_over", System.currentTimeMillis() - left);
        }
        out.put("received", values.size()).put("distinct", new java.util.HashSet<>(values).size());
    }

    /**
     * KafkaShareConsumer in explicit or implicit acknowledgement mode.
     *
     * <p>Sets {@code share.auto.offset.reset=earliest} on the group first
     * (IncrementalAlterConfigs on the GROUP resource); if the broker refuses,
     * the consumer subscribes first and then produces its own records.
     * In explicit mode the first record delivered is RELEASEd once and must
     * come back with delivery count 2; every other record is ACCEPTed.
     *
     * <p>Options: {@code --acquire-mode record_limit|batch_optimized} sets
     * {@code share.acquire.mode} (KIP-1206), {@code --max-poll-records N}
     * sets {@code max.poll.records}; the result reports the largest number
     * of records one poll returned ({@code max_poll_batch}).
     * {@code --produce-linger-ms N} makes the records produced by
     * {@code --produce} go out in big batches. {@code --renew-first}
     * (explicit mode, KIP-1222) acknowledges the first record RENEW instead
     * of RELEASE: the client must hand it back in a later poll, still with
     * delivery count 1 (a renewal is not a redelivery), and it is then
     * ACCEPTed like the others.
     */
    static void shareConsume(Opts o, Json out) throws Exception {
        String topic = o.str("topic");
        String group = o.str("group");
        String mode = o.str("mode", "explicit");
        int expect = o.num("expect", 0);
        int produce = o.num("produce", 0);
        long deadline = System.currentTimeMillis() + o.num("timeout-ms", 30000);
        boolean earliest = false;
        try (Admin admin = Admin.create(base(o))) {
            ConfigResource g = new ConfigResource(ConfigResource.Type.GROUP, group);
            admin.incrementalAlterConfigs(Map.of(g, List.of(new AlterConfigOp(
                new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET))))
                .all().get(20, TimeUnit.SECONDS);
            earliest = true;
        } catch (Exception e) {
            Throwable c = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
            out.put("group_config_error", c.getClass().getSimpleName());
        }
        out.put("group_config_set", earliest);
        Properties p = base(o);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put("share.acknowledgement.mode", mode);
        if (o.flag("acquire-mode")) {
            p.put(ConsumerConfig.SHARE_ACQUIRE_MODE_CONFIG, o.str("acquire-mode"));
        }
        if (o.flag("max-poll-records")) {
            p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, o.str("max-poll-records"));
        }
        boolean renewFirst = o.flag("renew-first");
        if (renewFirst && !mode.equals("explicit")) {
            throw new IllegalArgumentException("--renew-first needs --mode explicit");
        }
        List<String> values = new ArrayList<>();
        boolean released = false;
        boolean redelivered = false;
        String releasedValue = null;
        long renewedOffset = -1;
        boolean renewReturned = false;
        int renewReturnedCount = -1;
        int maxPollBatch = 0;
        int polls = 0;
        int commitErrors = 0;
        int commits = 0;
        try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(p)) {
            consumer.subscribe(List.of(topic));
            if (produce > 0) {
                // Join the group and let the share partitions initialise
                // before producing, so that 'latest' would also see them.
                long warm = System.currentTimeMillis() + o.num("warmup-ms", 3000);
                while (System.currentTimeMillis() < warm) {
                    for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                        values.add(r.value());
                    }
                }
                Properties pp = base(o);
                pp.put(ProducerConfig.ACKS_CONFIG, "all");
                if (o.flag("produce-linger-ms")) {
                    pp.put(ProducerConfig.LINGER_MS_CONFIG, o.str("produce-linger-ms"));
                    pp.put(ProducerConfig.BATCH_SIZE_CONFIG, "1048576");
                }
                try (KafkaProducer<String, String> producer = producer(o, pp)) {
                    for (int i = 0; i < produce; i++) {
                        producer.send(new ProducerRecord<>(topic, "k" + i, o.str("prefix", "share") + "-" + i));
                    }
                    producer.flush();
                }
            }
            while (System.currentTimeMillis() < deadline && (expect == 0 || values.size() < expect)) {
                ConsumerRecords<String, String> recs = consumer.poll(Duration.ofMillis(300));
                if (recs.isEmpty()) {
                    continue;
                }
                polls++;
                maxPollBatch = Math.max(maxPollBatch, recs.count());
                for (ConsumerRecord<String, String> r : recs) {
                    if (renewFirst) {
                        if (renewedOffset < 0) {
                            consumer.acknowledge(r, AcknowledgeType.RENEW);
                            renewedOffset = r.offset();
                            continue;
                        }
                        if (r.offset() == renewedOffset) {
                            renewReturned = true;
                            renewReturnedCount = r.deliveryCount().map(Short::intValue).orElse(-1);
                        }
                        consumer.acknowledge(r, AcknowledgeType.ACCEPT);
                    } else if (mode.equals("explicit")) {
                        if (!released) {
                            consumer.acknowledge(r, AcknowledgeType.RELEASE);
                            released = true;
                            releasedValue = r.value();
                            continue;
                        }
                        if (r.value().equals(releasedValue)) {
                            Optional<Short> dc = r.deliveryCount();
                            redelivered = dc.isPresent() && dc.get() >= 2;
                        }
                        consumer.acknowledge(r, AcknowledgeType.ACCEPT);
                    }
                    values.add(r.value());
                }
                Map<TopicIdPartition, Optional<KafkaException>> res = consumer.commitSync(Duration.ofSeconds(15));
                commits++;
                for (Optional<KafkaException> e : res.values()) {
                    if (e.isPresent()) {
                        commitErrors++;
                        out.put("commit_error", e.get().getClass().getSimpleName() + ": " + e.get().getMessage());
                    }
                }
            }
            out.put("mode", mode).put("received", values.size());
            out.put("distinct", new java.util.HashSet<>(values).size());
            out.put("commits", commits).put("commit_errors", commitErrors);
            out.put("polls", polls).put("max_poll_batch", maxPollBatch);
            out.put("acquire_mode", o.str("acquire-mode", "default"));
            out.put("acquisition_lock_timeout_ms", consumer.acquisitionLockTimeoutMs().orElse(-1));
            if (renewFirst) {
                out.put("renewed_offset", renewedOffset).put("renew_returned", renewReturned);
                out.put("renew_returned_delivery_count", renewReturnedCount);
            } else if (mode.equals("explicit")) {
                out.put("released_once", released).put("redelivered_with_count_2", redelivered);
            }
        }
        out.put("closed", true);
    }

    static String header(ConsumerRecord<String, String> r, String name) {
        Header h = r.headers().lastHeader(name);
        return h == null || h.value() == null ? null : new String(h.value(), java.nio.charset.StandardCharsets.UTF_8);
    }

    /**
     * KIP-1191: raises share.version to 2 if it is lower, creates the
     * dead-letter topic (errors.deadletterqueue.group.enable=true), points the
     * group at it with copy on, produces records, REJECTs each with a
     * KafkaShareConsumer (explicit mode), then reads the dead-letter topic
     * with a plain consumer and checks the __dlq.errors.* headers and the
     * copied key and value.
     */
    /** The root cause's simple class name of a failed admin future. */
    static String failure(org.apache.kafka.common.KafkaFuture<?> f) {
        try {
            f.get(30, TimeUnit.SECONDS);
            return "none";
        } catch (Exception e) {
            Throwable c = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
            return c.getClass().getSimpleName();
        }
    }

    /**
     * KIP-554 with the admin client: a SCRAM user described before it
     * exists, created, described, refused above 16384 iterations, deleted.
     */
    static void scramUsers(Opts o, Json out) throws Exception {
        String user = o.str("user");
        try (Admin admin = Admin.create(base(o))) {
            out.put("describe_missing", failure(
                admin.describeUserScramCredentials(List.of(user)).description(user)));
            admin.alterUserScramCredentials(List.of(new org.apache.kafka.clients.admin.UserScramCredentialUpsertion(
                user, new org.apache.kafka.clients.admin.ScramCredentialInfo(
                    org.apache.kafka.clients.admin.ScramMechanism.SCRAM_SHA_256, 8192), "interop-secret")))
                .all().get(30, TimeUnit.SECONDS);
            org.apache.kafka.clients.admin.UserScramCredentialsDescription d =
                admin.describeUserScramCredentials(List.of(user)).description(user).get(30, TimeUnit.SECONDS);
            List<String> infos = new ArrayList<>();
            for (org.apache.kafka.clients.admin.ScramCredentialInfo i : d.credentialInfos()) {
                infos.add(i.mechanism() + ":" + i.iterations());
            }
            out.put("credentials", String.join(",", infos));
            out.put("too_many_iterations", failure(admin.alterUserScramCredentials(List.of(
                new org.apache.kafka.clients.admin.UserScramCredentialUpsertion(user,
                    new org.apache.kafka.clients.admin.ScramCredentialInfo(
                        org.apache.kafka.clients.admin.ScramMechanism.SCRAM_SHA_512, 16385), "x")))
                .all()));
            admin.alterUserScramCredentials(List.of(new org.apache.kafka.clients.admin.UserScramCredentialDeletion(
                user, org.apache.kafka.clients.admin.ScramMechanism.SCRAM_SHA_256)))
                .all().get(30, TimeUnit.SECONDS);
            out.put("describe_deleted", failure(
                admin.describeUserScramCredentials(List.of(user)).description(user)));
            out.put("delete_missing", failure(admin.alterUserScramCredentials(List.of(
                new org.apache.kafka.clients.admin.UserScramCredentialDeletion(
                    user, org.apache.kafka.clients.admin.ScramMechanism.SCRAM_SHA_256))).all()));
        }
    }

    /**
     * KIP-546 with the admin client (what kafka-configs.sh --entity-type
     * clients/users --alter --add-config producer_byte_rate=... does), then
     * the quota at work: a byte-rate quota of 10 KiB/s for one client id,
     * described before, set, refused with an unknown key or a fractional
     * value for a rate, described by the client id, by the default user
     * and unfiltered; then a producer and a consumer with that client id
     * move about 130 KiB (ten seconds of the quota and a third more, so
     * that the last answers are throttled for about 3 s) and see throttle
     * times; the quotas removed. The
     * default user's consumer quota is removed before the consumer runs:
     * Kafka gives a user entity precedence over a client-id entity.
     */
    static void clientQuotas(Opts o, Json out) throws Exception {
        String topic = o.str("topic");
        String clientId = o.str("client-id");
        final long rate = 10240;
        final long userRate = 1048576;
        final int records = 130;
        org.apache.kafka.common.quota.ClientQuotaEntity client = new org.apache.kafka.common.quota.ClientQuotaEntity(
            Map.of(org.apache.kafka.common.quota.ClientQuotaEntity.CLIENT_ID, clientId));
        Map<String, String> defaultUserMap = new HashMap<>();
        defaultUserMap.put(org.apache.kafka.common.quota.ClientQuotaEntity.USER, null);
        org.apache.kafka.common.quota.ClientQuotaEntity defaultUser =
            new org.apache.kafka.common.quota.ClientQuotaEntity(defaultUserMap);
        org.apache.kafka.common.quota.ClientQuotaFilter byClient = org.apache.kafka.common.quota.ClientQuotaFilter.containsOnly(
            List.of(org.apache.kafka.common.quota.ClientQuotaFilterComponent.ofEntity(
                org.apache.kafka.common.quota.ClientQuotaEntity.CLIENT_ID, clientId)));
        org.apache.kafka.common.quota.ClientQuotaFilter byDefaultUser = org.apache.kafka.common.quota.ClientQuotaFilter.containsOnly(
            List.of(org.apache.kafka.common.quota.ClientQuotaFilterComponent.ofDefaultEntity(
                org.apache.kafka.common.quota.ClientQuotaEntity.USER)));
        try (Admin admin = Admin.create(base(o))) {
            java.util.function.Function<org.apache.kafka.common.quota.ClientQuotaFilter,
                Map<org.apache.kafka.common.quota.ClientQuotaEntity, Map<String, Double>>> describe = f -> {
                    try {
                        return admin.describeClientQuotas(f).entities().get(30, TimeUnit.SECONDS);
                    } catch (Exception e) {
                        throw new RuntimeException(e);
                    }
                };
            // "Class: message" of a refused alteration, or "none".
            java.util.function.BiFunction<org.apache.kafka.common.quota.ClientQuotaEntity,
                List<org.apache.kafka.common.quota.ClientQuotaAlteration.Op>, String> alter = (entity, ops) -> {
                    try {
                        admin.alterClientQuotas(List.of(
                            new org.apache.kafka.common.quota.ClientQuotaAlteration(entity, ops))).all().get(30, TimeUnit.SECONDS);
                        return "none";
                    } catch (Exception e) {
                        Throwable c = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
                        return c.getClass().getSimpleName() + ": " + c.getMessage();
                    }
                };
            java.util.function.Function<String, org.apache.kafka.common.quota.ClientQuotaAlteration.Op> remove =
                key -> new org.apache.kafka.common.quota.ClientQuotaAlteration.Op(key, null);
            out.put("describe_before", describe.apply(byClient).size());
            boolean removed = false;
            try {
                List<org.apache.kafka.common.quota.ClientQuotaAlteration> both = List.of(
                    new org.apache.kafka.common.quota.ClientQuotaAlteration(client, List.of(
                        new org.apache.kafka.common.quota.ClientQuotaAlteration.Op("producer_byte_rate", (double) rate),
                        new org.apache.kafka.common.quota.ClientQuotaAlteration.Op("consumer_byte_rate", (double) rate))),
                    new org.apache.kafka.common.quota.ClientQuotaAlteration(defaultUser, List.of(
                        new org.apache.kafka.common.quota.ClientQuotaAlteration.Op("consumer_byte_rate", (double) userRate))));
                String altered = failure(admin.alterClientQuotas(both).all());
                out.put("altered", "none".equals(altered) ? "ok" : altered);
                String[] refused = {
                    alter.apply(client, List.of(
                        new org.apache.kafka.common.quota.ClientQuotaAlteration.Op("no_such_rate", 1.0))),
                    alter.apply(client, List.of(
                        new org.apache.kafka.common.quota.ClientQuotaAlteration.Op("producer_byte_rate", 1.5))),
                    alter.apply(new org.apache.kafka.common.quota.ClientQuotaEntity(Map.of()), List.of(
                        new org.apache.kafka.common.quota.ClientQuotaAlteration.Op("producer_byte_rate", 1024.0)))};
                String[] refusedNames = {"unknown_key", "fractional_long", "empty_entity"};
                for (int i = 0; i < refused.length; i++) {
                    int colon = refused[i].indexOf(": ");
                    out.put(refusedNames[i], colon < 0 ? refused[i] : refused[i].substring(0, colon));
                    out.put(refusedNames[i] + "_message", colon < 0 ? null : refused[i].substring(colon + 2));
                }
                // Kafka applies the quotas asynchronously (the controller's
                // record reaches the broker's metadata): poll until seen.
                long setAt = System.currentTimeMillis();
                long deadline = setAt + 10_000;
                Map<String, Double> q = Map.of();
                Map<org.apache.kafka.common.quota.ClientQuotaEntity, Map<String, Double>> du = Map.of();
                while (System.currentTimeMillis() < deadline) {
                    Map<org.apache.kafka.common.quota.ClientQuotaEntity, Map<String, Double>> d = describe.apply(byClient);
                    q = d.getOrDefault(client, Map.of());
                    du = describe.apply(byDefaultUser);
                    if (q.containsKey("producer_byte_rate") && q.containsKey("consumer_byte_rate") && !du.isEmpty()) {
                        break;
                    }
                    Thread.sleep(100);
                }
                out.put("propagation_ms", System.currentTimeMillis() - setAt);
                out.put("quota_producer", q.containsKey("producer_byte_rate") ? q.get("producer_byte_rate").longValue() : -1L);
                out.put("quota_consumer", q.containsKey("consumer_byte_rate") ? q.get("consumer_byte_rate").longValue() : -1L);
                Map<String, Double> u = du.getOrDefault(defaultUser, Map.of());
                out.put("default_user_entities", du.size());
                // The default user comes back as the key "user" with a null name.
                out.put("default_user_name_null", du.keySet().stream().anyMatch(
                    e -> e.entries().containsKey(org.apache.kafka.common.quota.ClientQuotaEntity.USER)
                        && e.entries().get(org.apache.kafka.common.quota.ClientQuotaEntity.USER) == null));
                out.put("default_user_consumer", u.containsKey("consumer_byte_rate") ? u.get("consumer_byte_rate").longValue() : -1L);
                Map<org.apache.kafka.common.quota.ClientQuotaEntity, Map<String, Double>> all =
                    describe.apply(org.apache.kafka.common.quota.ClientQuotaFilter.all());
                out.put("entities_all", all.size());
                int ours = 0;
                for (org.apache.kafka.common.quota.ClientQuotaEntity e : all.keySet()) {
                    Map<String, String> m = e.entries();
                    if (m.equals(client.entries()) || m.equals(defaultUserMap)) {
                        ours++;
                    }
                }
                out.put("entities_ours", ours);
                Thread.sleep(1000);

                try {
                    admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get(30, TimeUnit.SECONDS);
                } catch (ExecutionException e) {
                    if (!(e.getCause() instanceof TopicExistsException)) {
                        throw e;
                    }
                }
                String value = "v".repeat(1024);
                Properties pp = base(o);
                pp.put(ProducerConfig.CLIENT_ID_CONFIG, clientId);
                pp.put(ProducerConfig.ACKS_CONFIG, "all");
                pp.put(ProducerConfig.LINGER_MS_CONFIG, "0");
                long produceStart = System.currentTimeMillis();
                java.util.concurrent.atomic.AtomicInteger acked = new java.util.concurrent.atomic.AtomicInteger();
                KafkaProducer<String, String> producer = producer(o, pp);
                try {
                    for (int i = 0; i < records; i++) {
                        producer.send(new ProducerRecord<>(topic, 0, "k" + i, value), (md, e) -> {
                            if (e == null) {
                                acked.incrementAndGet();
                            }
                        });
                    }
                    producer.flush();
                    out.put("produced", acked.get());
                    out.put("produce_ms", System.currentTimeMillis() - produceStart);
                    double t = metric(producer.metrics(), "producer-metrics", "produce-throttle-time-max");
                    out.put("produce_throttle_max_ms", Double.isFinite(t) ? (long) t : -1L);
                    out.put("produce_throttled", Double.isFinite(t) && t > 0);
                } finally {
                    producer.close(Duration.ofSeconds(5));
                }

                // Kafka resolves a quota from the most specific entity that
                // sets it, and every user entity (the default user included)
                // comes before a client-id entity: while the default user's
                // consumer_byte_rate is set, it is the consumer's quota
                // (1 MiB/s, never reached here). Remove it first, so that the
                // client id's 10 KiB/s applies to the fetches.
                out.put("default_user_removed", failure(admin.alterClientQuotas(List.of(
                    new org.apache.kafka.common.quota.ClientQuotaAlteration(defaultUser,
                        List.of(remove.apply("consumer_byte_rate"))))).all()));
                long userRemovedAt = System.currentTimeMillis();
                while (!describe.apply(byDefaultUser).isEmpty() && System.currentTimeMillis() < userRemovedAt + 10_000) {
                    Thread.sleep(100);
                }
                out.put("default_user_removal_ms", System.currentTimeMillis() - userRemovedAt);
                Thread.sleep(500);

                Properties cp = base(o);
                cp.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
                cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
                cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
                cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
                int consumed = 0;
                // "records@ms" of each poll that returned records: Kafka caps a
                // fetch at what the quota window allows and answers a
                // throttled fetch without records.
                List<String> polls = new ArrayList<>();
                long consumeStart = System.currentTimeMillis();
                long consumeDeadline = consumeStart + 60_000;
                try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
                    TopicPartition tp = new TopicPartition(topic, 0);
                    c.assign(List.of(tp));
                    c.seekToBeginning(List.of(tp));
                    while (System.currentTimeMillis() < consumeDeadline && consumed < records) {
                        int n = c.poll(Duration.ofMillis(300)).count();
                        if (n > 0) {
                            polls.add(n + "@" + (System.currentTimeMillis() - consumeStart));
                        }
                        consumed += n;
                    }
                    out.put("consumed", consumed);
                    out.put("consume_ms", System.currentTimeMillis() - consumeStart);
                    out.put("polls", polls);
                    double t = metric(c.metrics(), "consumer-fetch-manager-metrics", "fetch-throttle-time-max");
                    out.put("fetch_throttle_max_ms", Double.isFinite(t) ? (long) t : -1L);
                    out.put("fetch_throttled", Double.isFinite(t) && t > 0);
                }

                out.put("removed", failure(admin.alterClientQuotas(List.of(
                    new org.apache.kafka.common.quota.ClientQuotaAlteration(client,
                        List.of(remove.apply("producer_byte_rate"), remove.apply("consumer_byte_rate"))),
                    new org.apache.kafka.common.quota.ClientQuotaAlteration(defaultUser,
                        List.of(remove.apply("consumer_byte_rate"))))).all()));
                removed = true;
                long removedAt = System.currentTimeMillis();
                int after = -1;
                long afterDeadline = removedAt + 10_000;
                while (true) {
                    after = describe.apply(byClient).size() + describe.apply(byDefaultUser).size();
                    if (after == 0 || System.currentTimeMillis() >= afterDeadline) {
                        break;
                    }
                    Thread.sleep(100);
                }
                out.put("removal_ms", System.currentTimeMillis() - removedAt);
                out.put("describe_after", describe.apply(byClient).size());
                out.put("default_user_after", describe.apply(byDefaultUser).size());
            } finally {
                if (!removed) {
                    // Leave no quota behind for the scenarios that follow
                    // (best effort: the scenario has failed already).
                    failure(admin.alterClientQuotas(List.of(
                        new org.apache.kafka.common.quota.ClientQuotaAlteration(client,
                            List.of(remove.apply("producer_byte_rate"), remove.apply("consumer_byte_rate"))),
                        new org.apache.kafka.common.quota.ClientQuotaAlteration(defaultUser,
                            List.of(remove.apply("consumer_byte_rate"))))).all());
                }
            }
        }
    }

    /**
     * KIP-599 with the admin client: controller_mutation_rate=1 for one
     * client id (a bucket of eleven partitions), then that client creates
     * three topics in one request, of 10, 5 and 1 partitions. The first
     * two pass (the bucket is not below zero before them), the third is
     * refused with ThrottlingQuotaExceededException (the admin client's
     * own retry of throttled topics off, so the refusal is seen). The
     * topics and the quota are deleted after.
     */
    static void mutationQuota(Opts o, Json out) throws Exception {
        String prefix = o.str("topic-prefix");
        String clientId = o.str("client-id");
        org.apache.kafka.common.quota.ClientQuotaEntity entity = new org.apache.kafka.common.quota.ClientQuotaEntity(
            Map.of(org.apache.kafka.common.quota.ClientQuotaEntity.CLIENT_ID, clientId));
        org.apache.kafka.common.quota.ClientQuotaFilter byClient = org.apache.kafka.common.quota.ClientQuotaFilter.containsOnly(
            List.of(org.apache.kafka.common.quota.ClientQuotaFilterComponent.ofEntity(
                org.apache.kafka.common.quota.ClientQuotaEntity.CLIENT_ID, clientId)));
        List<String> names = List.of(prefix + "-a", prefix + "-b", prefix + "-c");
        try (Admin admin = Admin.create(base(o))) {
            out.put("altered", failure(admin.alterClientQuotas(List.of(
                new org.apache.kafka.common.quota.ClientQuotaAlteration(entity, List.of(
                    new org.apache.kafka.common.quota.ClientQuotaAlteration.Op("controller_mutation_rate", 1.0)))))
                .all()));
            // Kafka applies a quota once its record reaches the broker.
            long deadline = System.currentTimeMillis() + 10_000;
            while (System.currentTimeMillis() < deadline
                && admin.describeClientQuotas(byClient).entities().get(30, TimeUnit.SECONDS).isEmpty()) {
                Thread.sleep(100);
            }
            Thread.sleep(500);
            Properties p = base(o);
            p.put(AdminClientConfig.CLIENT_ID_CONFIG, clientId);
            try (Admin limited = Admin.create(p)) {
                org.apache.kafka.clients.admin.CreateTopicsResult r = limited.createTopics(List.of(
                    new NewTopic(names.get(0), 10, (short) 1),
                    new NewTopic(names.get(1), 5, (short) 1),
                    new NewTopic(names.get(2), 1, (short) 1)),
                    new org.apache.kafka.clients.admin.CreateTopicsOptions().retryOnQuotaViolation(false));
                List<String> results = new ArrayList<>();
                long throttle = -1;
                for (String n : names) {
                    try {
                        r.values().get(n).get(30, TimeUnit.SECONDS);
                        results.add("ok");
                    } catch (ExecutionException e) {
                        Throwable c = e.getCause() != null ? e.getCause() : e;
                        results.add(c.getClass().getSimpleName());
                        if (c instanceof org.apache.kafka.common.errors.ThrottlingQuotaExceededException) {
                            throttle = ((org.apache.kafka.common.errors.ThrottlingQuotaExceededException) c).throttleTimeMs();
                        }
                    }
                }
                out.put("created", results);
                out.put("refusal_throttle_ms", throttle);
            } finally {
                out.put("removed", failure(admin.alterClientQuotas(List.of(
                    new org.apache.kafka.common.quota.ClientQuotaAlteration(entity, List.of(
                        new org.apache.kafka.common.quota.ClientQuotaAlteration.Op("controller_mutation_rate", null)))))
                    .all()));
                List<String> existing = new ArrayList<>();
                for (String n : names) {
                    if (admin.listTopics().names().get(30, TimeUnit.SECONDS).contains(n)) {
                        existing.add(n);
                    }
                }
                out.put("deleted", failure(admin.deleteTopics(existing).all()));
            }
        }
    }

    /** A client metric's value by group and name; NaN when it is absent. */
    static double metric(Map<org.apache.kafka.common.MetricName, ? extends org.apache.kafka.common.Metric> metrics,
                         String group, String name) {
        for (Map.Entry<org.apache.kafka.common.MetricName, ? extends org.apache.kafka.common.Metric> e : metrics.entrySet()) {
            if (e.getKey().group().equals(group) && e.getKey().name().equals(name)
                && e.getValue().metricValue() instanceof Number) {
                return ((Number) e.getValue().metricValue()).doubleValue();
            }
        }
        return Double.NaN;
    }

    /**
     * DescribeLogDirs through the admin client, as kafka-log-dirs.sh and
     * cluster UIs use it: a topic of two partitions, ten records in the
     * first; both are described in the broker's log directories, the
     * first with a size above zero, the empty one at zero; a replica's
     * directory and offset lag through describeReplicaLogDirs.
     */
    /**
     * What kafka-reassign-partitions.sh and kafka-leader-election.sh ask of
     * a one-node cluster: no reassignment is listed, a reassignment to the
     * replicas a partition already has, to a broker that does not exist,
     * of a partition that does not exist, a cancel with nothing to cancel;
     * preferred and unclean elections of a partition whose leader is already
     * its preferred replica, of every partition, of a missing one.
     */
    static void reassignElect(Opts o, Json out) throws Exception {
        String topic = o.str("topic");
        try (Admin admin = Admin.create(base(o))) {
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get(30, TimeUnit.SECONDS);
            int broker = admin.describeCluster().nodes().get(30, TimeUnit.SECONDS).iterator().next().id();
            // The error's class and message, the topic and the broker ids
            // written as T, SELF and OTHER so that two clusters compare.
            java.util.function.Function<org.apache.kafka.common.KafkaFuture<?>, String> failure = f -> {
                try {
                    f.get(30, TimeUnit.SECONDS);
                    return "none";
                } catch (Exception e) {
                    Throwable c = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
                    return (c.getClass().getSimpleName() + ": " + c.getMessage())
                        .replace(topic, "T")
                        .replace("broker " + (broker + 1000), "broker OTHER")
                        .replace("broker " + broker + " ", "broker SELF ");
                }
            };
            TopicPartition tp = new TopicPartition(topic, 0);
            TopicPartition missing = new TopicPartition(topic + "-missing", 0);
            TopicPartition beyond = new TopicPartition(topic, 7);
            out.put("list_all", admin.listPartitionReassignments().reassignments().get(30, TimeUnit.SECONDS).size());
            out.put("list_one", admin.listPartitionReassignments(java.util.Set.of(tp)).reassignments().get(30, TimeUnit.SECONDS).size());
            out.put("list_missing", failure.apply(admin.listPartitionReassignments(java.util.Set.of(missing)).reassignments()));
            out.put("list_beyond", failure.apply(admin.listPartitionReassignments(java.util.Set.of(beyond)).reassignments()));
            java.util.function.Function<Optional<org.apache.kafka.clients.admin.NewPartitionReassignment>, Map<TopicPartition, Optional<org.apache.kafka.clients.admin.NewPartitionReassignment>>> one =
                r -> {
                    Map<TopicPartition, Optional<org.apache.kafka.clients.admin.NewPartitionReassignment>> m = new HashMap<>();
                    m.put(tp, r);
                    return m;
                };
            out.put("reassign_same", failure.apply(admin.alterPartitionReassignments(one.apply(
                Optional.of(new org.apache.kafka.clients.admin.NewPartitionReassignment(List.of(broker))))).all()));
            out.put("reassign_unknown_broker", failure.apply(admin.alterPartitionReassignments(one.apply(
                Optional.of(new org.apache.kafka.clients.admin.NewPartitionReassignment(List.of(broker + 1000))))).all()));
            out.put("reassign_two_replicas", failure.apply(admin.alterPartitionReassignments(one.apply(
                Optional.of(new org.apache.kafka.clients.admin.NewPartitionReassignment(List.of(broker, broker + 1000))))).all()));
            out.put("reassign_duplicate", failure.apply(admin.alterPartitionReassignments(one.apply(
                Optional.of(new org.apache.kafka.clients.admin.NewPartitionReassignment(List.of(broker, broker))))).all()));
            out.put("cancel", failure.apply(admin.alterPartitionReassignments(one.apply(Optional.empty())).all()));
            Map<TopicPartition, Optional<org.apache.kafka.clients.admin.NewPartitionReassignment>> m = new HashMap<>();
            m.put(missing, Optional.of(new org.apache.kafka.clients.admin.NewPartitionReassignment(List.of(broker))));
            out.put("reassign_missing", failure.apply(admin.alterPartitionReassignments(m).all()));
            m = new HashMap<>();
            m.put(beyond, Optional.of(new org.apache.kafka.clients.admin.NewPartitionReassignment(List.of(broker))));
            out.put("reassign_beyond", failure.apply(admin.alterPartitionReassignments(m).all()));
            out.put("list_after", admin.listPartitionReassignments().reassignments().get(30, TimeUnit.SECONDS).size());
            out.put("elect_preferred", failure.apply(admin.electLeaders(org.apache.kafka.common.ElectionType.PREFERRED, java.util.Set.of(tp)).all()));
            out.put("elect_unclean", failure.apply(admin.electLeaders(org.apache.kafka.common.ElectionType.UNCLEAN, java.util.Set.of(tp)).all()));
            out.put("elect_missing", failure.apply(admin.electLeaders(org.apache.kafka.common.ElectionType.PREFERRED, java.util.Set.of(missing)).all()));
            out.put("elect_beyond", failure.apply(admin.electLeaders(org.apache.kafka.common.ElectionType.PREFERRED, java.util.Set.of(beyond)).all()));
            Map<TopicPartition, Optional<Throwable>> all = admin.electLeaders(
                org.apache.kafka.common.ElectionType.PREFERRED, null).partitions().get(30, TimeUnit.SECONDS);
            out.put("elect_all_results", all.size());
        }
    }

    static void logDirs(Opts o, Json out) throws Exception {
        String topic = o.str("topic");
        try (Admin admin = Admin.create(base(o))) {
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get(30, TimeUnit.SECONDS);
            try (KafkaProducer<String, String> producer = producer(o, base(o))) {
                for (int i = 0; i < 10; i++) {
                    producer.send(new ProducerRecord<>(topic, 0, "k", "value-" + i)).get(30, TimeUnit.SECONDS);
                }
            }
            int broker = admin.describeCluster().nodes().get(30, TimeUnit.SECONDS).iterator().next().id();
            Map<String, org.apache.kafka.clients.admin.LogDirDescription> dirs =
                admin.describeLogDirs(List.of(broker)).allDescriptions().get(30, TimeUnit.SECONDS).get(broker);
            out.put("log_dirs", dirs.size());
            long size0 = -1, size1 = -1, lag0 = -1;
            boolean future0 = true;
            List<String> errors = new ArrayList<>();
            List<String> volumes = new ArrayList<>();
            for (org.apache.kafka.clients.admin.LogDirDescription d : dirs.values()) {
                if (d.error() != null) {
                    errors.add(d.error().getClass().getSimpleName());
                }
                org.apache.kafka.clients.admin.ReplicaInfo r0 = d.replicaInfos().get(new TopicPartition(topic, 0));
                org.apache.kafka.clients.admin.ReplicaInfo r1 = d.replicaInfos().get(new TopicPartition(topic, 1));
                if (r0 != null) {
                    size0 = r0.size();
                    lag0 = r0.offsetLag();
                    future0 = r0.isFuture();
                }
                if (r1 != null) {
                    size1 = r1.size();
                }
                // The volume's sizes (v4): both known with usable <= total,
                // or both unknown (a broker without a disk).
                if (d.totalBytes().isPresent() && d.usableBytes().isPresent()) {
                    volumes.add(d.usableBytes().getAsLong() <= d.totalBytes().getAsLong() ? "consistent" : "inconsistent");
                } else if (d.totalBytes().isEmpty() && d.usableBytes().isEmpty()) {
                    volumes.add("unknown");
                } else {
                    volumes.add("half");
                }
            }
            out.put("errors", String.join(",", errors));
            out.put("partition0_has_data", size0 > 0);
            out.put("partition1_size", size1);
            out.put("offset_lag", lag0);
            out.put("current_log", size0 >= 0 && !future0);
            out.put("volumes", String.join(",", volumes));
            org.apache.kafka.common.TopicPartitionReplica replica =
                new org.apache.kafka.common.TopicPartitionReplica(topic, 0, broker);
            org.apache.kafka.clients.admin.DescribeReplicaLogDirsResult.ReplicaLogDirInfo info =
                admin.describeReplicaLogDirs(List.of(replica)).all().get(30, TimeUnit.SECONDS).get(replica);
            out.put("replica_dir_known", info.getCurrentReplicaLogDir() != null);
            out.put("replica_offset_lag", info.getCurrentReplicaOffsetLag());
            out.put("replica_future_dir_absent", info.getFutureReplicaLogDir() == null);
        }
    }

    /**
     * KIP-320's position check (OffsetForLeaderEpoch): a KafkaConsumer that
     * seeks to a position carrying a leader epoch, or resumes from a
     * committed offset that carries one, asks the broker where that epoch
     * ends before it fetches. Ten records in epoch 0, then:
     * a valid position is kept; a position past the epoch's end is a
     * LogTruncationException naming the end as the divergent offset (no
     * reset policy), or is reset to that end (a reset policy), where a
     * consumer that skipped the check would see an out-of-range offset.
     */
    static void leaderEpoch(Opts o, Json out) throws Exception {
        String topic = o.str("topic");
        TopicPartition tp = new TopicPartition(topic, 0);
        try (Admin admin = Admin.create(base(o))) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get(30, TimeUnit.SECONDS);
        }
        try (KafkaProducer<String, String> producer = producer(o, base(o))) {
            for (int i = 0; i < 10; i++) {
                producer.send(new ProducerRecord<>(topic, 0, "k", "value-" + i)).get(30, TimeUnit.SECONDS);
            }
        }
        out.put("valid_seek", firstOffsetAfterSeek(o, tp, 4, "none", null));
        out.put("past_end_no_reset", firstOffsetAfterSeek(o, tp, 15, "none", null));
        out.put("past_end_reset_earliest", firstOffsetAfterSeek(o, tp, 15, "earliest", null));
        // A group's committed offset with its epoch, as a consumer commits it.
        String group = topic + "-group";
        Properties p = consumerProps(o, "none");
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            c.assign(List.of(tp));
            c.commitSync(Map.of(tp, new OffsetAndMetadata(6, Optional.of(0), "")));
        }
        out.put("committed_resume", firstOffsetAfterSeek(o, tp, -1, "none", group));
    }

    static Properties consumerProps(Opts o, String reset) {
        Properties p = base(o);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, reset);
        return p;
    }

    /**
     * Seeks {@code tp} to {@code offset} in leader epoch 0 (or, with a
     * group and offset -1, starts from the group's committed offset) and
     * polls: "offset N" for the first record's offset, "position N" when
     * the position moved without a record, or the exception's class with
     * its divergent offset.
     */
    static String firstOffsetAfterSeek(Opts o, TopicPartition tp, long offset, String reset, String group) {
        Properties p = consumerProps(o, reset);
        if (group != null) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        }
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            c.assign(List.of(tp));
            if (offset >= 0) {
                c.seek(tp, new OffsetAndMetadata(offset, Optional.of(0), ""));
            }
            long deadline = System.currentTimeMillis() + 20000;
            while (System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(300));
                for (ConsumerRecord<String, String> r : recs) {
                    return "offset " + r.offset();
                }
                if (offset >= 0 && c.position(tp) != offset) {
                    return "position " + c.position(tp);
                }
            }
            return "nothing";
        } catch (org.apache.kafka.clients.consumer.LogTruncationException e) {
            OffsetAndMetadata d = e.divergentOffsets().get(tp);
            return e.getClass().getSimpleName() + " divergent " + (d == null ? "none" : d.offset() + "@" + d.leaderEpoch().orElse(-1));
        } catch (KafkaException e) {
            return e.getClass().getSimpleName();
        }
    }

    /**
     * KIP-848's group configs with the admin client: set, described as the
     * group's own, an out-of-range value refused, deleted back to the default.
     */
    static void groupConfigs(Opts o, Json out) throws Exception {
        String group = o.str("group");
        ConfigResource g = new ConfigResource(ConfigResource.Type.GROUP, group);
        try (Admin admin = Admin.create(base(o))) {
            admin.incrementalAlterConfigs(Map.of(g, List.of(
                new AlterConfigOp(new ConfigEntry("consumer.heartbeat.interval.ms", "15000"), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("consumer.session.timeout.ms", "60000"), AlterConfigOp.OpType.SET))))
                .all().get(30, TimeUnit.SECONDS);
            Config c = admin.describeConfigs(List.of(g)).all().get(30, TimeUnit.SECONDS).get(g);
            ConfigEntry hb = c.get("consumer.heartbeat.interval.ms");
            ConfigEntry st = c.get("consumer.session.timeout.ms");
            out.put("heartbeat", hb == null ? null : hb.value());
            out.put("heartbeat_source", hb == null ? null : hb.source().toString());
            out.put("session", st == null ? null : st.value());
            out.put("out_of_range", failure(admin.incrementalAlterConfigs(Map.of(g, List.of(
                new AlterConfigOp(new ConfigEntry("consumer.session.timeout.ms", "40000"), AlterConfigOp.OpType.SET))))
                .all()));
            admin.incrementalAlterConfigs(Map.of(g, List.of(
                new AlterConfigOp(new ConfigEntry("consumer.heartbeat.interval.ms", ""), AlterConfigOp.OpType.DELETE))))
                .all().get(30, TimeUnit.SECONDS);
            ConfigEntry back = admin.describeConfigs(List.of(g)).all().get(30, TimeUnit.SECONDS).get(g)
                .get("consumer.heartbeat.interval.ms");
            out.put("heartbeat_after_delete", back == null ? null : back.value());
        }
    }

    static void shareDlq(Opts o, Json out) throws Exception {
        String topic = o.str("topic");
        String group = o.str("group");
        String dlq = o.str("dlq");
        int n = o.num("produce", 5);
        long deadline = System.currentTimeMillis() + o.num("timeout-ms", 40000);
        try (Admin admin = Admin.create(base(o))) {
            FinalizedVersionRange sv = admin.describeFeatures().featureMetadata().get(20, TimeUnit.SECONDS)
                .finalizedFeatures().get("share.version");
            short before = sv == null ? 0 : sv.maxVersionLevel();
            out.put("share_version_before", (int) before);
            if (before < 2) {
                admin.updateFeatures(Map.of("share.version",
                        new FeatureUpdate((short) 2, FeatureUpdate.UpgradeType.UPGRADE)),
                    new UpdateFeaturesOptions()).all().get(20, TimeUnit.SECONDS);
                out.put("share_version_upgraded_to", 2);
            }
            NewTopic nt = new NewTopic(dlq, 1, (short) 1)
                .configs(Map.of("errors.deadletterqueue.group.enable", "true"));
            try {
                admin.createTopics(List.of(nt)).all().get(20, TimeUnit.SECONDS);
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof TopicExistsException)) {
                    throw e;
                }
            }
            ConfigResource g = new ConfigResource(ConfigResource.Type.GROUP, group);
            List<AlterConfigOp> ops = new ArrayList<>();
            for (String[] kv : new String[][] {
                {"share.auto.offset.reset", "earliest"},
                {"errors.deadletterqueue.topic.name", dlq},
                {"errors.deadletterqueue.copy.record.enable", "true"}}) {
                ops.add(new AlterConfigOp(new ConfigEntry(kv[0], kv[1]), AlterConfigOp.OpType.SET));
            }
            admin.incrementalAlterConfigs(Map.of(g, ops)).all().get(20, TimeUnit.SECONDS);
        }
        Properties pp = base(o);
        pp.put(ProducerConfig.ACKS_CONFIG, "all");
        try (KafkaProducer<String, String> producer = producer(o, pp)) {
            for (int i = 0; i < n; i++) {
                producer.send(new ProducerRecord<>(topic, "k" + i, "dead-" + i));
            }
            producer.flush();
        }
        Properties p = base(o);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put("share.acknowledgement.mode", "explicit");
        java.util.Set<String> rejected = new java.util.HashSet<>();
        Map<String, String> keyOf = new HashMap<>();
        try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(p)) {
            consumer.subscribe(List.of(topic));
            while (System.currentTimeMillis() < deadline && rejected.size() < n) {
                ConsumerRecords<String, String> recs = consumer.poll(Duration.ofMillis(300));
                if (recs.isEmpty()) {
                    continue;
                }
                for (ConsumerRecord<String, String> r : recs) {
                    consumer.acknowledge(r, AcknowledgeType.REJECT);
                    rejected.add(r.value());
                    keyOf.put(r.value(), r.key());
                }
                consumer.commitSync(Duration.ofSeconds(15));
            }
        }
        out.put("rejected", rejected.size());
        Properties cp = base(o);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group + "-dlq-reader");
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        int records = 0;
        int headersOk = 0;
        int copied = 0;
        List<String> messages = new ArrayList<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
            TopicPartition tp = new TopicPartition(dlq, 0);
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            while (System.currentTimeMillis() < deadline && records < n) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(300))) {
                    records++;
                    String msg = header(r, "__dlq.errors.message");
                    messages.add(String.valueOf(msg));
                    if (topic.equals(header(r, "__dlq.errors.topic"))
                        && "0".equals(header(r, "__dlq.errors.partition"))
                        && header(r, "__dlq.errors.offset") != null
                        && group.equals(header(r, "__dlq.errors.group"))
                        && "1".equals(header(r, "__dlq.errors.delivery.count"))
                        && "Offset rejected by client.".equals(msg)) {
                        headersOk++;
                    }
                    if (r.value() != null && rejected.contains(r.value())
                        && r.key() != null && r.key().equals(keyOf.get(r.value()))) {
                        copied++;
                    }
                }
            }
        }
        out.put("dlq_records", records).put("headers_ok", headersOk).put("copied", copied);
        out.put("messages", new java.util.TreeSet<>(messages));
    }
}
