// The Java side of the `kafka` test tier: Apache Kafka's own clients, driven by JSON files
// so one JVM start does a whole step. Compiled by tests/kafka/conftest.py at test time
// against the jars `make kafka-jars` fetched, once per Kafka version (4.3.1 and 3.9.1: it
// uses only client APIs both have).
//
//   admin    BOOTSTRAP SPEC.json            create topics: [{"topic", "partitions", "configs"}]
//   produce  BOOTSTRAP SPEC.json            [{"topic", "props", "transactions": [{"abort": bool,
//                                           "records": [...]}]} or {"topic", "props", "records"}]
//   consume  BOOTSTRAP ISOLATION OUT TOPIC.. every record of every partition, from the log
//                                           start to the end offsets (LSO under read_committed),
//                                           as JSON lines; then {"end": {"topic-p": offset}}
//   append   BOOTSTRAP TOPIC COUNT PAUSE [HOLDS]
//                                           COUNT records key k<i> value v<i>, acks=all, printing
//                                           "acked N" and pausing PAUSE ms every 1000 (the
//                                           live-log test's producer); at each N of HOLDS
//                                           (comma-separated multiples of 1000) it prints
//                                           "held N" and waits for a line on stdin
//   group    BOOTSTRAP GROUP PROTOCOL OUT TOPIC..
//                                           a group consumer (group.protocol=PROTOCOL: consumer is
//                                           KIP-848, classic the rebalance protocol; client.id
//                                           GROUP-client) subscribes to the TOPICs, polls until it is
//                                           assigned every partition and has read to their end
//                                           offsets, commits, writes {"memberId", "memberEpoch",
//                                           "assignment": {"topic-p": committed}, "first":
//                                           {"topic-p": first offset it read}, "topicIds":
//                                           {"topic": id}} to OUT and leaves the group (close)
//
// A record: {"key": base64|null, "value": base64|null, "headers": [[key, base64|null]],
// "partition": int|null, "timestamp": ms|null}. Bytes are base64 so nothing is re-encoded.
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.File;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class KafkaTool {
    static final ObjectMapper JSON = new ObjectMapper();
    static final Base64.Encoder B64 = Base64.getEncoder();
    static final Base64.Decoder UNB64 = Base64.getDecoder();

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "admin": admin(args[1], JSON.readTree(new File(args[2]))); break;
            case "produce": produce(args[1], JSON.readTree(new File(args[2]))); break;
            case "consume": consume(args[1], args[2], args[3],
                                    java.util.Arrays.copyOfRange(args, 4, args.length)); break;
            case "group": group(args[1], args[2], args[3], args[4],
                                java.util.Arrays.copyOfRange(args, 5, args.length)); break;
            case "append": append(args[1], args[2], Integer.parseInt(args[3]),
                                  Integer.parseInt(args[4]),
                                  args.length > 5 ? args[5] : ""); break;
            default: throw new IllegalArgumentException("unknown command " + args[0]);
        }
    }

    static Properties base(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.dns.lookup", "use_all_dns_ips");
        return p;
    }

    static void admin(String bootstrap, JsonNode spec) throws Exception {
        try (Admin admin = Admin.create(base(bootstrap))) {
            List<NewTopic> topics = new ArrayList<>();
            for (JsonNode t : spec) {
                NewTopic nt = new NewTopic(t.get("topic").asText(), t.get("partitions").asInt(),
                                           (short) 1);
                Map<String, String> configs = new HashMap<>();
                if (t.has("configs")) {
                    t.get("configs").fields().forEachRemaining(
                        e -> configs.put(e.getKey(), e.getValue().asText()));
                }
                topics.add(nt.configs(configs));
            }
            admin.createTopics(topics).all().get();
        }
    }

    static byte[] bytes(JsonNode n) {
        return n == null || n.isNull() ? null : UNB64.decode(n.asText());
    }

    static ProducerRecord<byte[], byte[]> record(String topic, JsonNode r) {
        List<Header> headers = new ArrayList<>();
        if (r.has("headers")) {
            for (JsonNode h : r.get("headers")) {
                headers.add(new RecordHeader(h.get(0).asText(), bytes(h.get(1))));
            }
        }
        Integer partition = r.hasNonNull("partition") ? r.get("partition").asInt() : null;
        Long ts = r.hasNonNull("timestamp") ? r.get("timestamp").asLong() : null;
        return new ProducerRecord<>(topic, partition, ts, bytes(r.get("key")),
                                    bytes(r.get("value")), headers);
    }

    static KafkaProducer<byte[], byte[]> producer(String bootstrap, JsonNode props) {
        Properties p = base(bootstrap);
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        if (props != null) {
            props.fields().forEachRemaining(e -> p.put(e.getKey(), e.getValue().asText()));
        }
        return new KafkaProducer<>(p);
    }

    static void produce(String bootstrap, JsonNode spec) throws Exception {
        for (JsonNode t : spec) {
            String topic = t.get("topic").asText();
            try (KafkaProducer<byte[], byte[]> prod = producer(bootstrap, t.get("props"))) {
                if (t.has("transactions")) {
                    prod.initTransactions();
                    for (JsonNode txn : t.get("transactions")) {
                        prod.beginTransaction();
                        for (JsonNode r : txn.get("records")) prod.send(record(topic, r));
                        prod.flush();
                        if (txn.path("abort").asBoolean(false)) prod.abortTransaction();
                        else prod.commitTransaction();
                    }
                } else {
                    List<Future<RecordMetadata>> acks = new ArrayList<>();
                    for (JsonNode r : t.get("records")) acks.add(prod.send(record(topic, r)));
                    for (Future<RecordMetadata> f : acks) f.get();
                }
            }
        }
    }

    static void consume(String bootstrap, String isolation, String out, String[] topics)
            throws Exception {
        Properties p = base(bootstrap);
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("isolation.level", isolation);
        p.put("check.crcs", "true");
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p);
             PrintWriter w = new PrintWriter(out, StandardCharsets.UTF_8)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (String topic : topics) {
                for (PartitionInfo pi : c.partitionsFor(topic, Duration.ofSeconds(30))) {
                    tps.add(new TopicPartition(topic, pi.partition()));
                }
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps, Duration.ofSeconds(30));
            long deadline = System.currentTimeMillis() + 60_000;
            while (true) {
                boolean done = true;
                for (TopicPartition tp : tps) {
                    if (c.position(tp, Duration.ofSeconds(30)) < end.get(tp)) done = false;
                }
                if (done) break;
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("consumer did not reach " + end);
                }
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) {
                    ObjectNode o = JSON.createObjectNode();
                    o.put("topic", r.topic());
                    o.put("partition", r.partition());
                    o.put("offset", r.offset());
                    o.put("key", r.key() == null ? null : B64.encodeToString(r.key()));
                    o.put("value", r.value() == null ? null : B64.encodeToString(r.value()));
                    o.put("timestamp", r.timestamp());
                    o.put("timestampType", r.timestampType().id);
                    ArrayNode hs = o.putArray("headers");
                    for (Header h : r.headers()) {
                        ArrayNode pair = hs.addArray();
                        pair.add(h.key());
                        pair.add(h.value() == null ? null : B64.encodeToString(h.value()));
                    }
                    w.println(JSON.writeValueAsString(o));
                }
            }
            ObjectNode ends = JSON.createObjectNode();
            ObjectNode e = ends.putObject("end");
            for (TopicPartition tp : tps) e.put(tp.topic() + "-" + tp.partition(), end.get(tp));
            w.println(JSON.writeValueAsString(ends));
        }
    }

    static void group(String bootstrap, String group, String protocol, String out,
                      String[] topics) throws Exception {
        Properties p = base(bootstrap);
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("group.id", group);
        p.put("group.protocol", protocol);
        p.put("client.id", group + "-client");
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        try (Admin admin = Admin.create(base(bootstrap));
             KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p);
             PrintWriter w = new PrintWriter(out, StandardCharsets.UTF_8)) {
            java.util.Set<TopicPartition> all = new java.util.HashSet<>();
            for (String topic : topics) {
                for (PartitionInfo pi : c.partitionsFor(topic, Duration.ofSeconds(30))) {
                    all.add(new TopicPartition(topic, pi.partition()));
                }
            }
            Map<TopicPartition, Long> end = c.endOffsets(all, Duration.ofSeconds(30));
            c.subscribe(java.util.Arrays.asList(topics));
            Map<TopicPartition, Long> first = new HashMap<>();
            long deadline = System.currentTimeMillis() + 60_000;
            while (true) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    first.putIfAbsent(new TopicPartition(r.topic(), r.partition()), r.offset());
                }
                boolean done = c.assignment().equals(all);
                for (TopicPartition tp : c.assignment()) {
                    if (c.position(tp, Duration.ofSeconds(30)) < end.get(tp)) done = false;
                }
                if (done) break;
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("group consumer did not read " + end
                                                    + " (assigned " + c.assignment() + ")");
                }
            }
            c.commitSync(Duration.ofSeconds(30));
            ObjectNode o = JSON.createObjectNode();
            o.put("memberId", c.groupMetadata().memberId());
            o.put("memberEpoch", c.groupMetadata().generationId());
            ObjectNode a = o.putObject("assignment");
            for (TopicPartition tp : all) {
                a.put(tp.topic() + "-" + tp.partition(), c.position(tp));
            }
            ObjectNode f = o.putObject("first");
            first.forEach((tp, off) -> f.put(tp.topic() + "-" + tp.partition(), off));
            ObjectNode ids = o.putObject("topicIds");
            admin.describeTopics(java.util.Arrays.asList(topics)).allTopicNames().get()
                .forEach((name, d) -> ids.put(name, d.topicId().toString()));
            w.println(JSON.writeValueAsString(o));
        }
    }

    static void append(String bootstrap, String topic, int count, int pause, String holds)
            throws Exception {
        java.util.Set<Integer> held = new java.util.HashSet<>();
        for (String h : holds.split(",")) if (!h.isEmpty()) held.add(Integer.parseInt(h));
        java.io.BufferedReader in = new java.io.BufferedReader(
            new java.io.InputStreamReader(System.in, StandardCharsets.UTF_8));
        Properties props = base(bootstrap);
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        props.put("acks", "all");
        props.put("linger.ms", "2");
        props.put("batch.size", "2048");
        try (KafkaProducer<byte[], byte[]> prod = new KafkaProducer<>(props)) {
            for (int i = 0; i < count; i++) {
                Future<RecordMetadata> f = prod.send(new ProducerRecord<>(
                    topic, 0, null, ("k" + i).getBytes(StandardCharsets.UTF_8),
                    ("v" + i).getBytes(StandardCharsets.UTF_8)));
                if ((i + 1) % 1000 == 0) {
                    f.get();
                    System.out.println("acked " + (i + 1));
                    System.out.flush();
                    if (held.contains(i + 1)) {
                        System.out.println("held " + (i + 1));
                        System.out.flush();
                        if (in.readLine() == null) throw new IllegalStateException("stdin closed");
                    }
                    Thread.sleep(pause);
                }
            }
            prod.flush();
        }
        System.out.println("done " + count);
    }
}
