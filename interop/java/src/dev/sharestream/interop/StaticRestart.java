package dev.sharestream.interop;

import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A static member of a {@code group.protocol=consumer} group restarts:
 * consumers A (instance id {@code <group>-a}) and B ({@code <group>-b})
 * share {@code --topic}; A closes (a static member's close leaves with
 * member epoch -2, keeping its slot) and a new consumer with A's instance
 * id comes back within the session timeout. It must get exactly A's
 * partitions, and B must see no revocation or new assignment meanwhile.
 *
 * <p>Prints {@code RESULT {"ok":true,"paired":..,"same_partitions":..,
 * "b_callbacks_after_pairing":N,...}}. Usage: {@code StaticRestart
 * --bootstrap HOST:PORT --topic T --group G [--timeout-ms MS]}.
 */
public final class StaticRestart {
    private StaticRestart() {}

    private static Properties props(String bootstrap, String group, String instance) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instance);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return p;
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
        StringBuilder out = new StringBuilder("{\"ok\":true");
        int code = 0;
        try {
            AtomicInteger bCallbacks = new AtomicInteger();
            ConsumerRebalanceListener bListener = new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> ps) {
                    if (!ps.isEmpty()) {
                        bCallbacks.incrementAndGet();
                    }
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> ps) {
                    if (!ps.isEmpty()) {
                        bCallbacks.incrementAndGet();
                    }
                }
            };
            try (KafkaConsumer<String, String> b =
                     new KafkaConsumer<>(props(bootstrap, group, group + "-b"))) {
                int partitions = b.partitionsFor(topic, Duration.ofSeconds(20)).size();
                b.subscribe(List.of(topic), bListener);
                Set<TopicPartition> aHad;
                boolean paired = false;
                try (KafkaConsumer<String, String> a1 =
                         new KafkaConsumer<>(props(bootstrap, group, group + "-a"))) {
                    a1.subscribe(List.of(topic));
                    while (System.currentTimeMillis() < deadline) {
                        a1.poll(Duration.ofMillis(200));
                        b.poll(Duration.ofMillis(200));
                        if (!a1.assignment().isEmpty() && !b.assignment().isEmpty()
                                && a1.assignment().size() + b.assignment().size() == partitions) {
                            paired = true;
                            break;
                        }
                    }
                    aHad = new HashSet<>(a1.assignment());
                }
                // A closed: as a static member it left with epoch -2.
                Set<TopicPartition> bHad = new HashSet<>(b.assignment());
                int callbacksAtPairing = bCallbacks.get();
                Set<TopicPartition> aNow = new HashSet<>();
                try (KafkaConsumer<String, String> a2 =
                         new KafkaConsumer<>(props(bootstrap, group, group + "-a"))) {
                    a2.subscribe(List.of(topic));
                    while (System.currentTimeMillis() < deadline) {
                        a2.poll(Duration.ofMillis(200));
                        b.poll(Duration.ofMillis(200));
                        if (!a2.assignment().isEmpty()) {
                            aNow = new HashSet<>(a2.assignment());
                            break;
                        }
                    }
                    // A few more rounds: nothing may move afterwards either.
                    for (int i = 0; i < 10; i++) {
                        a2.poll(Duration.ofMillis(200));
                        b.poll(Duration.ofMillis(200));
                    }
                    out.append(",\"paired\":").append(paired)
                        .append(",\"partitions\":").append(partitions)
                        .append(",\"a_partitions\":").append(aHad.size())
                        .append(",\"same_partitions\":").append(!aHad.isEmpty() && aHad.equals(aNow))
                        .append(",\"a_kept_after\":").append(aNow.equals(a2.assignment()))
                        .append(",\"b_unchanged\":").append(bHad.equals(b.assignment()))
                        .append(",\"b_callbacks_after_pairing\":")
                        .append(bCallbacks.get() - callbacksAtPairing);
                }
            }
        } catch (Exception e) {
            String msg = String.valueOf(e).replace("\\", "\\\\").replace("\"", "'");
            out = new StringBuilder("{\"ok\":false,\"error\":\"" + msg + "\"");
            code = 1;
        }
        System.out.println("RESULT " + out.append("}"));
        System.out.flush();
        System.exit(code);
    }
}
