package dev.sharestream.bench;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
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
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Rebalance time of one consumer group of {@code MEMBERS} (4) KafkaConsumers
 * on a topic of {@code PARTITIONS} partitions, each member polling in its own
 * thread. The members join one after another: each subscribes once the
 * members before it own a complete assignment. Three figures, in ms:
 *
 * <ul>
 *   <li>{@code first_ms}: from the first member's subscribe to it owning
 *       every partition (includes the broker's
 *       {@code group.initial.rebalance.delay.ms} on the classic protocol);
 *   <li>{@code join_ms}: from the last member's subscribe to every member
 *       owning at least one partition and every partition owned by exactly
 *       one member;
 *   <li>{@code leave_ms}: from the first member's {@code close()} (the
 *       classic group's leader) to the remaining members owning every
 *       partition exactly once.
 * </ul>
 *
 * "Owning" is what the application sees: partitions handed to
 * {@code onPartitionsAssigned} and not yet taken back by
 * {@code onPartitionsRevoked} or {@code onPartitionsLost}. The topic and the
 * group (TOPIC + "-group") are created if needed; use a fresh topic per run.
 *
 * <p>MODE: {@code eager} (classic protocol, RangeAssignor), {@code cooperative}
 * (classic protocol, CooperativeStickyAssignor) or {@code consumer}
 * ({@code group.protocol=consumer}, the broker's {@code uniform} assignor).
 * Further consumer settings as KEY=VALUE. Every other setting is the client's
 * default (heartbeat.interval.ms 3000 on the classic protocol; the consumer
 * protocol's interval is the broker's group.consumer.heartbeat.interval.ms).
 *
 * <p>Prints {@code RESULT mode=.. first_ms=.. join_ms=.. leave_ms=..}; exits 1
 * if a phase does not complete within 120 s.
 *
 * <p>Usage: RebalanceBench BOOTSTRAP TOPIC PARTITIONS MODE [MEMBERS] [KEY=VALUE...]
 */
public final class RebalanceBench {
  private static final long PHASE_TIMEOUT_MS = 120_000;

  /** Ownership by member id; guarded by itself. */
  private final Map<Integer, Set<TopicPartition>> owned = new HashMap<>();

  private final Properties base;
  private final String topic;
  private final int partitions;

  private RebalanceBench(Properties base, String topic, int partitions) {
    this.base = base;
    this.topic = topic;
    this.partitions = partitions;
  }

  /** One group member: a consumer polling in its own thread. */
  private final class Member implements Runnable {
    final int id;
    volatile boolean stop;
    volatile long subscribedAt;
    volatile KafkaConsumer<byte[], byte[]> consumer;
    final Thread thread;

    Member(int id) {
      this.id = id;
      this.thread = new Thread(this, "member-" + id);
      this.thread.setDaemon(true);
    }

    @Override
    public void run() {
      Properties p = new Properties();
      p.putAll(base);
      p.put(ConsumerConfig.CLIENT_ID_CONFIG, topic + "-member-" + id);
      KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p);
      consumer = c;
      try {
        subscribedAt = System.nanoTime();
        c.subscribe(
            List.of(topic),
            new ConsumerRebalanceListener() {
              @Override
              public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                update(id, parts, true);
              }

              @Override
              public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                update(id, parts, false);
              }

              @Override
              public void onPartitionsLost(Collection<TopicPartition> parts) {
                update(id, parts, false);
              }
            });
        synchronized (owned) {
          owned.notifyAll();
        }
        while (!stop) {
          try {
            c.poll(Duration.ofMillis(100));
          } catch (WakeupException e) {
            // close() below
          }
        }
      } finally {
        c.close();
      }
    }
  }

  private void update(int id, Collection<TopicPartition> parts, boolean add) {
    synchronized (owned) {
      Set<TopicPartition> mine = owned.computeIfAbsent(id, k -> new HashSet<>());
      if (add) {
        mine.addAll(parts);
      } else {
        mine.removeAll(parts);
      }
      owned.notifyAll();
    }
  }

  /** Every member in `live` owns a partition, every partition is owned exactly once. */
  private boolean covered(Set<Integer> live) {
    Set<TopicPartition> seen = new HashSet<>();
    for (int m : live) {
      Set<TopicPartition> mine = owned.getOrDefault(m, Set.of());
      if (mine.isEmpty()) {
        return false;
      }
      for (TopicPartition tp : mine) {
        if (!seen.add(tp)) {
          return false;
        }
      }
    }
    return seen.size() == partitions;
  }

  /** Waits until `live` covers the topic; returns the moment (nanoTime). */
  private long awaitCovered(Set<Integer> live, String phase) throws InterruptedException {
    long deadline = System.currentTimeMillis() + PHASE_TIMEOUT_MS;
    synchronized (owned) {
      while (!covered(live)) {
        long left = deadline - System.currentTimeMillis();
        if (left <= 0) {
          System.out.println("RESULT error=timeout phase=" + phase + " owned=" + owned);
          System.exit(1);
        }
        owned.wait(left);
      }
    }
    return System.nanoTime();
  }

  private static long ms(long fromNanos, long toNanos) {
    return (toNanos - fromNanos) / 1_000_000;
  }

  private void awaitSubscribed(Member m) throws InterruptedException {
    synchronized (owned) {
      while (m.subscribedAt == 0) {
        owned.wait(100);
      }
    }
  }

  public static void main(String[] args) throws Exception {
    String bootstrap = args[0];
    String topic = args[1];
    int partitions = Integer.parseInt(args[2]);
    String mode = args[3];
    int members = args.length > 4 && !args[4].contains("=") ? Integer.parseInt(args[4]) : 4;

    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ConsumerConfig.GROUP_ID_CONFIG, topic + "-group");
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    switch (mode) {
      case "eager" -> {
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, RangeAssignor.class.getName());
      }
      case "cooperative" -> {
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        p.put(
            ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
            CooperativeStickyAssignor.class.getName());
      }
      case "consumer" -> {
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        p.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, "uniform");
      }
      default -> throw new IllegalArgumentException("mode: eager, cooperative or consumer");
    }
    for (String a : args) {
      int eq = a.indexOf('=');
      if (eq > 0) {
        p.put(a.substring(0, eq), a.substring(eq + 1));
      }
    }

    Properties ap = new Properties();
    ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    try (Admin admin = Admin.create(ap)) {
      try {
        admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get();
      } catch (ExecutionException e) {
        if (!(e.getCause() instanceof TopicExistsException)) {
          throw e;
        }
      }
      // Wait until the topic's partitions are known to the broker.
      long deadline = System.currentTimeMillis() + 30_000;
      while (true) {
        try {
          int n = admin.describeTopics(List.of(topic)).allTopicNames().get()
              .get(topic).partitions().size();
          if (n == partitions) {
            break;
          }
        } catch (ExecutionException e) {
          // not there yet
        }
        if (System.currentTimeMillis() > deadline) {
          System.out.println("RESULT error=topic_not_ready");
          System.exit(1);
        }
        Thread.sleep(100);
      }
    }

    RebalanceBench b = new RebalanceBench(p, topic, partitions);
    List<Member> group = new ArrayList<>();
    Set<Integer> live = new HashSet<>();
    long firstMs = 0;
    long joinMs = 0;
    for (int i = 0; i < members; i++) {
      Member m = b.new Member(i);
      group.add(m);
      live.add(i);
      m.thread.start();
      b.awaitSubscribed(m);
      long done = b.awaitCovered(live, "join-" + (i + 1));
      if (i == 0) {
        firstMs = ms(m.subscribedAt, done);
      }
      if (i == members - 1) {
        joinMs = ms(m.subscribedAt, done);
      }
    }

    Member leaver = group.get(0);
    long leaveAt = System.nanoTime();
    synchronized (b.owned) {
      live.remove(leaver.id);
      b.owned.remove(leaver.id);
    }
    leaver.stop = true;
    leaver.consumer.wakeup();
    long left = b.awaitCovered(live, "leave");
    long leaveMs = ms(leaveAt, left);

    for (Member m : group) {
      if (m != leaver) {
        m.stop = true;
        m.consumer.wakeup();
      }
    }
    for (Member m : group) {
      m.thread.join(30_000);
    }
    System.out.println(
        "RESULT mode=" + mode + " members=" + members + " partitions=" + partitions
            + " first_ms=" + firstMs + " join_ms=" + joinMs + " leave_ms=" + leaveMs);
  }
}
