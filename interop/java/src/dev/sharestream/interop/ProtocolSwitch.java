package dev.sharestream.interop;

import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * One group changes protocol while empty: a {@code group.protocol=classic}
 * consumer reads {@code --topic} (created with two partitions, ten records
 * produced), commits and closes; ten more records are produced; a
 * {@code group.protocol=consumer} consumer of the same group must resume
 * from the committed offsets (only the ten new records) and then, closed,
 * hand the group back to a classic consumer that finds nothing new.
 *
 * <p>Prints {@code RESULT {"ok":true,"classic":N,"consumer":N,
 * "consumer_new_only":..,"classic_again":N}}. Usage: {@code ProtocolSwitch
 * --bootstrap HOST:PORT --topic T --group G [--timeout-ms MS]}.
 */
public final class ProtocolSwitch {
    private ProtocolSwitch() {}

    private static void produce(String bootstrap, String topic, String prefix) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < 10; i++) {
                producer.send(new ProducerRecord<>(topic, i % 2, "k" + i, prefix + i)).get();
            }
        }
    }

    /** Reads until {@code expect} records came (or the deadline), commits, closes. */
    private static Set<String> consume(String bootstrap, String topic, String group, String protocol,
                                       int expect, long deadline) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        Set<String> got = new HashSet<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            c.subscribe(List.of(topic));
            // With expect 0: poll until the group has assigned the partitions
            // and a few polls more, to see that nothing new comes.
            int quiet = 0;
            while (System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    got.add(r.value());
                }
                if (expect > 0 && got.size() >= expect) {
                    break;
                }
                if (expect == 0 && !c.assignment().isEmpty() && ++quiet >= 10) {
                    break;
                }
            }
            c.commitSync();
        }
        return got;
    }

    public static void main(String[] args) {
        Map<String, String> a = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            a.put(args[i], args[i + 1]);
        }
        String bootstrap = a.get("--bootstrap");
        String topic = a.get("--topic");
        String group = a.get("--group");
        long deadline = System.currentTimeMillis() + Long.parseLong(a.getOrDefault("--timeout-ms", "60000"));
        String out;
        int code = 0;
        try {
            Properties ap = new Properties();
            ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            try (Admin admin = Admin.create(ap)) {
                try {
                    admin.createTopics(Collections.singleton(new NewTopic(topic, 2, (short) 1))).all().get();
                } catch (ExecutionException e) {
                    if (!(e.getCause() instanceof TopicExistsException)) {
                        throw e;
                    }
                }
            }
            produce(bootstrap, topic, "old-");
            Set<String> classic = consume(bootstrap, topic, group, "classic", 10, deadline);
            produce(bootstrap, topic, "new-");
            Set<String> consumer = consume(bootstrap, topic, group, "consumer", 10, deadline);
            boolean newOnly = consumer.stream().allMatch(v -> v.startsWith("new-"));
            Set<String> again = consume(bootstrap, topic, group, "classic", 0, deadline);
            out = "{\"ok\":true,\"classic\":" + classic.size() + ",\"consumer\":" + consumer.size()
                + ",\"consumer_new_only\":" + newOnly + ",\"classic_again\":" + again.size() + "}";
        } catch (Exception e) {
            String msg = String.valueOf(e).replace("\\", "\\\\").replace("\"", "'");
            out = "{\"ok\":false,\"error\":\"" + msg + "\"}";
            code = 1;
        }
        System.out.println("RESULT " + out);
        System.out.flush();
        System.exit(code);
    }
}
