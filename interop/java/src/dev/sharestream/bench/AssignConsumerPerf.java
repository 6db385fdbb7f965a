package dev.sharestream.bench;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Consume throughput in assign mode (no consumer group, so it runs against
 * sharestream's broker as well as Kafka): reads every partition of a topic
 * from the beginning until N records arrived and prints one line
 * {@code RESULT records=.. bytes=.. seconds=.. records_per_s=.. mb_per_s=..}
 * (payload bytes: keys + values). The clock starts at the first poll.
 *
 * <p>Usage: AssignConsumerPerf BOOTSTRAP TOPIC RECORDS
 */
public final class AssignConsumerPerf {
  public static void main(String[] args) {
    String bootstrap = args[0];
    String topic = args[1];
    long want = Long.parseLong(args[2]);
    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_uncommitted");
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
      List<TopicPartition> tps = new ArrayList<>();
      for (PartitionInfo pi : c.partitionsFor(topic, Duration.ofSeconds(30))) {
        tps.add(new TopicPartition(topic, pi.partition()));
      }
      c.assign(tps);
      c.seekToBeginning(tps);
      long records = 0;
      long bytes = 0;
      long start = System.nanoTime();
      long lastProgress = start;
      while (records < want) {
        ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(500));
        long now = System.nanoTime();
        if (rs.isEmpty()) {
          if (now - lastProgress > 20_000_000_000L) {
            System.out.println("RESULT error=stalled records=" + records);
            System.exit(1);
          }
          continue;
        }
        lastProgress = now;
        for (ConsumerRecord<byte[], byte[]> r : rs) {
          records++;
          if (r.key() != null) bytes += r.key().length;
          if (r.value() != null) bytes += r.value().length;
        }
      }
      double secs = (System.nanoTime() - start) / 1e9;
      System.out.printf(
          "RESULT records=%d bytes=%d seconds=%.3f records_per_s=%.0f mb_per_s=%.2f%n",
          records, bytes, secs, records / secs, bytes / secs / (1024.0 * 1024.0));
    }
  }
}
