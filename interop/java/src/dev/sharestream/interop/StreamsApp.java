package dev.sharestream.interop;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueBytesStoreSupplier;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;

/**
 * A Kafka Streams application under {@code exactly_once_v2}: a word count
 * with a repartition topic and a state store whose changelog is a compacted
 * topic, checked end to end.
 *
 * <p>Input: {@code --records} records on {@code --input} ({@code --partitions}
 * partitions), key {@code src-i} (so they spread over the partitions), value
 * {@code w<i mod --keys>}. The topology re-keys each record by its value
 * ({@code groupBy}, so Streams writes it through the repartition topic
 * {@code <app>-rekey-repartition}), counts per word in the store
 * {@code counts} (logging enabled: {@code <app>-counts-changelog}) and writes
 * every update to {@code --output}. The record cache is off, so every input
 * record produces one update.
 *
 * <p>With {@code --instances 2}, a second instance joins once half of the
 * input is counted: the group rebalances (cooperative-sticky, classic
 * protocol) and the tasks that move restore their store from the changelog
 * before counting on.
 *
 * <p>With {@code --crash}, the first instance runs in a child JVM that is
 * killed (SIGKILL) while input keeps arriving, most likely in the middle of
 * a transaction; a new instance then takes over once the group drops the
 * dead member (session timeout). The dead producer's open transaction is
 * aborted by the broker's transaction timeout, the new instance resumes at
 * the committed offsets (OffsetFetch with requireStable) and restores the
 * store from the changelog's committed records only.
 *
 * <p>Verdict, read with a read_committed consumer: every word's updates in
 * the committed output are exactly 1, 2, ..., n in order, n being the
 * number of input records with that word (a duplicate, a gap or a
 * regression shows an exactly-once failure); the repartition and changelog
 * topics exist, the changelog with {@code cleanup.policy=compact}.
 */
public final class StreamsApp {
    private StreamsApp() {}

    /** The first error that stopped a stream thread: the run fails at once with it. */
    static volatile Throwable failure;

    public static void main(String[] args) throws Exception {
        if (args.length > 0 && args[0].equals("--worker")) {
            // The child of --crash: one instance, run until killed.
            Check.Opts o = new Check.Opts(args, 1);
            start(o, o.str("app-id"), o.str("input"), o.str("output"), o.str("store", "rocksdb"), new ArrayList<>(), new long[1]);
            Thread.sleep(Long.MAX_VALUE);
            return;
        }
        Check.Json out = new Check.Json().put("check", "streams-eos-count");
        int status = 0;
        try {
            run(new Check.Opts(args, 0), out);
            out.put("ok", true);
        } catch (Throwable t) {
            status = Check.failed(out, t);
        }
        Check.finish(out, status);
    }

    static void run(Check.Opts o, Check.Json out) throws Exception {
        String app = o.str("app-id");
        String input = o.str("input");
        String output = o.str("output");
        int partitions = o.num("partitions", 3);
        int records = o.num("records", 300);
        int keys = o.num("keys", 7);
        int instances = o.num("instances", 1);
        String store = o.str("store", "rocksdb");
        long deadline = System.currentTimeMillis() + o.num("timeout-ms", 90000);
        out.put("store", store).put("instances", instances);

        Map<String, Long> expected = new TreeMap<>();
        for (int i = 0; i < records; i++) {
            expected.merge("w" + (i % keys), 1L, Long::sum);
        }
        try (Admin admin = Admin.create(Check.base(o))) {
            admin.createTopics(List.of(new NewTopic(input, partitions, (short) 1), new NewTopic(output, partitions, (short) 1)))
                .all().get(30, TimeUnit.SECONDS);
        }

        List<KafkaStreams> running = new ArrayList<>();
        List<Path> stateDirs = new ArrayList<>();
        Map<String, List<Long>> updates = new TreeMap<>();
        long[] restored = new long[1];
        Process child = null;
        try (KafkaProducer<String, String> producer = seedProducer(o);
             KafkaConsumer<String, Long> reader = outputReader(o, output)) {
            if (o.flag("crash")) {
                child = startChild(o, stateDirs);
                int third = records / 3;
                seed(producer, input, 0, third, keys);
                read(reader, updates, prefix(third, keys), deadline, "the first third (child instance)");
                // Input keeps arriving while the child is killed.
                for (int i = third; i < 2 * third; i++) {
                    seed(producer, input, i, i + 1, keys);
                    if (i == third + third / 2) {
                        child.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
                        out.put("killed_child", true);
                    }
                }
                running.add(start(o, app, input, output, store, stateDirs, restored));
                seed(producer, input, 2 * third, records, keys);
            } else {
                running.add(start(o, app, input, output, store, stateDirs, restored));
                int half = instances > 1 ? records / 2 : records;
                seed(producer, input, 0, half, keys);
                if (instances > 1) {
                    // Count the first half on one instance, then let a second
                    // one join: tasks move and restore from the changelog.
                    read(reader, updates, prefix(half, keys), deadline, "first half");
                    for (int k = 1; k < instances; k++) {
                        running.add(start(o, app, input, output, store, stateDirs, restored));
                    }
                    seed(producer, input, half, records, keys);
                }
            }
            read(reader, updates, expected, deadline, "all records");
            out.put("streams_state", String.valueOf(running.get(0).state()));
            // --wait-standby N: standby tasks are set up after the active
            // ones, so wait (bounded) until the instances hold N of them.
            int waitStandby = o.num("wait-standby", 0);
            long standbyDeadline = System.currentTimeMillis() + 30_000;
            List<Integer> tasks = new ArrayList<>();
            List<Integer> standby = new ArrayList<>();
            while (true) {
                tasks.clear();
                standby.clear();
                for (KafkaStreams s : running) {
                    tasks.add(s.metadataForLocalThreads().stream().mapToInt(t -> t.activeTasks().size()).sum());
                    standby.add(s.metadataForLocalThreads().stream().mapToInt(t -> t.standbyTasks().size()).sum());
                }
                int held = standby.stream().mapToInt(Integer::intValue).sum();
                if (held >= waitStandby || System.currentTimeMillis() > standbyDeadline) {
                    break;
                }
                Thread.sleep(200);
            }
            out.put("active_tasks_per_instance", tasks);
            out.put("standby_tasks_per_instance", standby);
        } finally {
            if (child != null) {
                child.destroyForcibly();
            }
            // Leave the group on close, so that it is Empty at once (the
            // streams application reset tool needs that).
            for (KafkaStreams s : running) {
                s.close(CloseOptions.timeout(Duration.ofSeconds(20))
                    .withGroupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP));
            }
            for (Path d : stateDirs) {
                deleteTree(d);
            }
        }
        out.put("restored_records", restored[0]);

        // Exactly once: each word's committed updates are 1..n, in order.
        int badSequences = 0;
        long updatesSeen = 0;
        List<String> problems = new ArrayList<>();
        for (Map.Entry<String, Long> e : expected.entrySet()) {
            List<Long> seq = updates.getOrDefault(e.getKey(), List.of());
            updatesSeen += seq.size();
            boolean good = seq.size() == e.getValue();
            for (int i = 0; good && i < seq.size(); i++) {
                good = seq.get(i) == i + 1;
            }
            if (!good) {
                badSequences++;
                if (problems.size() < 3) {
                    problems.add(e.getKey() + "=" + seq);
                }
            }
        }
        out.put("words", expected.size()).put("expected_updates", records).put("updates", updatesSeen);
        out.put("bad_sequences", badSequences).put("problems", problems);
        if (!updates.keySet().equals(expected.keySet())) {
            throw new IllegalStateException("output words " + updates.keySet() + ", expected " + expected.keySet());
        }

        try (Admin admin = Admin.create(Check.base(o))) {
            Set<String> topics = admin.listTopics().names().get(30, TimeUnit.SECONDS);
            String repartition = app + "-rekey-repartition";
            String changelog = app + "-counts-changelog";
            out.put("repartition_topic", topics.contains(repartition));
            out.put("changelog_topic", topics.contains(changelog));
            String windowed = app + "-windowed-changelog";
            out.put("changelog_cleanup_policy", cleanupPolicy(admin, topics, changelog));
            out.put("windowed_changelog_cleanup_policy", cleanupPolicy(admin, topics, windowed));
            if (topics.contains(repartition)) {
                int n = admin.describeTopics(List.of(repartition)).allTopicNames()
                    .get(30, TimeUnit.SECONDS).get(repartition).partitions().size();
                out.put("repartition_partitions", n);
                // Streams deletes the repartition records it has committed
                // past (DeleteRecords): their log start offsets moved up.
                Map<TopicPartition, OffsetSpec> earliest = new HashMap<>();
                for (int i = 0; i < n; i++) {
                    earliest.put(new TopicPartition(repartition, i), OffsetSpec.earliest());
                }
                long purged = 0;
                for (ListOffsetsResult.ListOffsetsResultInfo info
                        : admin.listOffsets(earliest).all().get(30, TimeUnit.SECONDS).values()) {
                    purged += info.offset();
                }
                out.put("repartition_purged", purged);
            }
        }
    }

    /** The first instance of --crash, in a child JVM (same classpath), with its own state folder. */
    static Process startChild(Check.Opts o, List<Path> stateDirs) throws IOException {
        Path stateDir = Files.createTempDirectory("sharestream-streams-");
        stateDirs.add(stateDir);
        List<String> cmd = new ArrayList<>(List.of(
            Path.of(System.getProperty("java.home"), "bin", "java").toString(),
            "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"));
        String log4j = System.getProperty("log4j2.configurationFile");
        if (log4j != null) {
            cmd.add("-Dlog4j2.configurationFile=" + log4j);
        }
        cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), StreamsApp.class.getName(), "--worker",
            "--state-dir", stateDir.toString()));
        for (Map.Entry<String, String> e : o.values.entrySet()) {
            cmd.add("--" + e.getKey());
            cmd.add(e.getValue());
        }
        return new ProcessBuilder(cmd)
            .redirectOutput(ProcessBuilder.Redirect.DISCARD)
            .redirectError(ProcessBuilder.Redirect.INHERIT)
            .start();
    }

    static KafkaStreams start(Check.Opts o, String app, String input, String output, String store, List<Path> stateDirs,
                              long[] restored) throws IOException {
        Path stateDir = o.flag("state-dir") ? Path.of(o.str("state-dir")) : Files.createTempDirectory("sharestream-streams-");
        stateDirs.add(stateDir);
        Properties p = Check.base(o);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, app);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "100");
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, o.str("threads", "1"));
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        // Quick rebalances for a bounded test.
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), "10000");
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), "1000");
        // Purge consumed repartition records soon (DeleteRecords), so the check below sees it.
        p.put(StreamsConfig.REPARTITION_PURGE_INTERVAL_MS_CONFIG, "500");
        // Settings for Streams only (e.g. group.protocol=streams), name=value,...
        for (String kv : o.str("streams-props", "").split(",")) {
            int eq = kv.indexOf('=');
            if (eq > 0) {
                p.put(kv.substring(0, eq), kv.substring(eq + 1));
            }
        }

        KeyValueBytesStoreSupplier supplier = "memory".equals(store)
            ? Stores.inMemoryKeyValueStore("counts")
            : Stores.persistentKeyValueStore("counts");
        StreamsBuilder b = new StreamsBuilder();
        KGroupedStream<String, String> byWord = b.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
            .groupBy((k, v) -> v, Grouped.with("rekey", Serdes.String(), Serdes.String()));
        byWord.count(Materialized.<String, Long>as(supplier).withLoggingEnabled(Map.of()))
            .toStream()
            .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        // A windowed count too: its changelog is created with
        // cleanup.policy=compact,delete and a retention.
        byWord.windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofMinutes(10)))
            .count(Materialized.as("windowed"));
        KafkaStreams streams = new KafkaStreams(b.build(), p);
        streams.setGlobalStateRestoreListener(new StateRestoreListener() {
            @Override
            public void onRestoreStart(TopicPartition tp, String storeName, long start, long end) {}

            @Override
            public void onBatchRestored(TopicPartition tp, String storeName, long end, long n) {
                synchronized (restored) {
                    restored[0] += n;
                }
            }

            @Override
            public void onRestoreEnd(TopicPartition tp, String storeName, long total) {}
        });
        streams.setUncaughtExceptionHandler(e -> {
            failure = e;
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.start();
        return streams;
    }

    static String cleanupPolicy(Admin admin, Set<String> topics, String topic) throws Exception {
        if (!topics.contains(topic)) {
            return null;
        }
        ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        Config cfg = admin.describeConfigs(List.of(res)).all().get(30, TimeUnit.SECONDS).get(res);
        ConfigEntry cleanup = cfg.get("cleanup.policy");
        return cleanup == null ? null : cleanup.value();
    }

    static KafkaProducer<String, String> seedProducer(Check.Opts o) {
        Properties p = Check.base(o);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        return new KafkaProducer<>(p);
    }

    static void seed(KafkaProducer<String, String> producer, String topic, int from, int to, int keys) throws Exception {
        List<java.util.concurrent.Future<?>> sent = new ArrayList<>();
        for (int i = from; i < to; i++) {
            sent.add(producer.send(new ProducerRecord<>(topic, "src-" + i, "w" + (i % keys))));
        }
        producer.flush();
        for (java.util.concurrent.Future<?> f : sent) {
            f.get(30, TimeUnit.SECONDS);
        }
    }

    static KafkaConsumer<String, Long> outputReader(Check.Opts o, String topic) {
        Properties p = Check.base(o);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, LongDeserializer.class.getName());
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        KafkaConsumer<String, Long> c = new KafkaConsumer<>(p);
        List<TopicPartition> tps = new ArrayList<>();
        for (PartitionInfo pi : c.partitionsFor(topic, Duration.ofSeconds(20))) {
            tps.add(new TopicPartition(topic, pi.partition()));
        }
        c.assign(tps);
        c.seekToBeginning(tps);
        return c;
    }

    /** The counts once records [0, n) are counted. */
    static Map<String, Long> prefix(int n, int keys) {
        Map<String, Long> m = new HashMap<>();
        for (int i = 0; i < n; i++) {
            m.merge("w" + (i % keys), 1L, Long::sum);
        }
        return m;
    }

    /** Reads committed updates until every word has reached its count in {@code want}. */
    static void read(KafkaConsumer<String, Long> reader, Map<String, List<Long>> updates, Map<String, Long> want,
                     long deadline, String what) {
        while (!reached(updates, want)) {
            if (failure != null) {
                throw new IllegalStateException("a stream thread died while waiting for " + what + ": " + failure, failure);
            }
            if (System.currentTimeMillis() > deadline) {
                Map<String, Long> last = new TreeMap<>();
                updates.forEach((k, v) -> last.put(k, v.get(v.size() - 1)));
                throw new IllegalStateException("timed out waiting for " + what + ": latest counts " + last
                    + ", expected " + new TreeMap<>(want));
            }
            for (ConsumerRecord<String, Long> r : reader.poll(Duration.ofMillis(200))) {
                updates.computeIfAbsent(r.key(), k -> new ArrayList<>()).add(r.value());
            }
        }
        // A little longer, so that an update beyond the expected count shows.
        long until = System.currentTimeMillis() + 1000;
        while (System.currentTimeMillis() < until) {
            for (ConsumerRecord<String, Long> r : reader.poll(Duration.ofMillis(200))) {
                updates.computeIfAbsent(r.key(), k -> new ArrayList<>()).add(r.value());
            }
        }
    }

    static boolean reached(Map<String, List<Long>> updates, Map<String, Long> want) {
        for (Map.Entry<String, Long> e : want.entrySet()) {
            List<Long> seq = updates.get(e.getKey());
            if (seq == null || seq.get(seq.size() - 1) < e.getValue()) {
                return false;
            }
        }
        return true;
    }

    static void deleteTree(Path root) throws IOException {
        if (!Files.exists(root)) {
            return;
        }
        try (Stream<Path> walk = Files.walk(root)) {
            for (Path p : walk.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        }
    }
}
