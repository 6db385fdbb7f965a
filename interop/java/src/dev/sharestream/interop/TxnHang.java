package dev.sharestream.interop;

import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Leaves a transaction open, as a producer killed mid-transaction does:
 * creates {@code --topic} (one partition), begins a transaction, sends
 * three records to partition 0, flushes them, prints
 * {@code RESULT {"ok":true,"start_offset":N}} and halts the JVM without
 * committing, aborting or closing. The transaction stays open on the
 * partition until its coordinator times it out
 * ({@code --txn-timeout-ms}) or an admin aborts it
 * ({@code kafka-transactions.sh abort}).
 *
 * <p>Usage: {@code TxnHang --bootstrap HOST:PORT --topic T
 * --transactional-id ID [--txn-timeout-ms MS]}.
 */
public final class TxnHang {
    private TxnHang() {}

    public static void main(String[] args) {
        Map<String, String> a = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            a.put(args[i], args[i + 1]);
        }
        String bootstrap = a.get("--bootstrap");
        String topic = a.get("--topic");
        String txnId = a.get("--transactional-id");
        String timeout = a.getOrDefault("--txn-timeout-ms", "900000");
        try {
            Properties ap = new Properties();
            ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            try (Admin admin = Admin.create(ap)) {
                try {
                    admin.createTopics(Collections.singleton(new NewTopic(topic, 1, (short) 1)))
                        .all().get();
                } catch (ExecutionException e) {
                    if (!(e.getCause() instanceof TopicExistsException)) {
                        throw e;
                    }
                }
            }
            Properties p = new Properties();
            p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
            p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, timeout);
            p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            KafkaProducer<String, String> producer = new KafkaProducer<>(p);
            producer.initTransactions();
            producer.beginTransaction();
            long first = -1;
            for (int i = 0; i < 3; i++) {
                RecordMetadata m = producer
                    .send(new ProducerRecord<>(topic, 0, "k" + i, "hanging-" + i)).get();
                if (first < 0) {
                    first = m.offset();
                }
            }
            producer.flush();
            System.out.println("RESULT {\"ok\":true,\"start_offset\":" + first + "}");
            System.out.flush();
            // No commit, no abort, no close: the transaction stays open.
            Runtime.getRuntime().halt(0);
        } catch (Exception e) {
            String msg = String.valueOf(e).replace("\\", "\\\\").replace("\"", "'");
            System.out.println("RESULT {\"ok\":false,\"error\":\"" + msg + "\"}");
            System.out.flush();
            Runtime.getRuntime().halt(1);
        }
    }
}
