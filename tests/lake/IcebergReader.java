// Reads an Iceberg table with Apache Iceberg's own Java library (iceberg-core, -data,
// -parquet from Maven Central; `make iceberg-jars`), the implementation the export does
// not use: the oracle of tests/lake. Given a table metadata file, prints one JSON line for
// the table (format version, schema, partition spec, sort order, identifier fields, every
// snapshot with its summary, oldest first) and one JSON line per row: topic, partition, offset, timestamp
// (epoch microseconds), timestampType, key and value (hex, or null), headers ([key, hex
// value or null] pairs, or null).
//
//   javac -cp '.cache/iceberg-jars/*' -d BUILD tests/lake/IcebergReader.java
//   java -cp 'BUILD:.cache/iceberg-jars/*' IcebergReader file:///.../metadata/00001-....metadata.json
//   java -cp 'BUILD:.cache/iceberg-jars/*' IcebergReader jdbc:sqlite:WAREHOUSE/kafkalog-catalog.db \
//       CATALOG_NAME NAMESPACE.TABLE file://WAREHOUSE
// The second form finds the table through Iceberg's own JdbcCatalog, as Spark's Iceberg
// runtime would with a jdbc catalog on the same file.
//   java -cp 'BUILD:.cache/iceberg-rest-jars/*' -Dcatalog.io-impl=... IcebergReader \
//       http://127.0.0.1:PORT CATALOG_NAME NAMESPACE.TABLE
// The third finds it through Iceberg's RESTCatalog. Both catalog forms take more catalog
// properties (e.g. an S3 warehouse's S3FileIO settings) as system properties
// `catalog.<property>`. Rows are read by IcebergGenerics, which applies position and
// equality delete files, so a table with row-level deletes (an upsert table another
// engine wrote to) reads as its live rows.

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedWriter;
import java.io.OutputStreamWriter;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.temporal.ChronoUnit;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.BaseTable;
import org.apache.iceberg.CatalogProperties;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.StaticTableOperations;
import org.apache.iceberg.Table;
import org.apache.iceberg.data.IcebergGenerics;
import org.apache.iceberg.data.Record;
import org.apache.iceberg.catalog.TableIdentifier;
import org.apache.iceberg.hadoop.HadoopFileIO;
import org.apache.iceberg.jdbc.JdbcCatalog;
import org.apache.iceberg.io.CloseableIterable;

public class IcebergReader {
  private static final ObjectMapper JSON = new ObjectMapper();

  /** System properties `catalog.<property>` as catalog properties (e.g. S3FileIO's). */
  private static Map<String, String> systemCatalogProperties() {
    Map<String, String> props = new HashMap<>();
    for (String name : System.getProperties().stringPropertyNames()) {
      if (name.startsWith("catalog.")) {
        props.put(name.substring("catalog.".length()), System.getProperty(name));
      }
    }
    return props;
  }

  public static void main(String[] args) throws Exception {
    Table table;
    if (args.length == 1) {
      HadoopFileIO io = new HadoopFileIO(new Configuration());
      table = new BaseTable(new StaticTableOperations(args[0], io), "export");
    } else if (args.length == 4 && args[0].startsWith("jdbc:")) {
      JdbcCatalog catalog = new JdbcCatalog();
      catalog.setConf(new Configuration());
      Map<String, String> props = new HashMap<>();
      props.putAll(systemCatalogProperties());
      props.put(CatalogProperties.URI, args[0]);
      props.put(CatalogProperties.WAREHOUSE_LOCATION, args[3]);
      catalog.initialize(args[1], props);
      table = catalog.loadTable(TableIdentifier.parse(args[2]));
    } else if (args.length == 3 && args[0].startsWith("http")) {
      Map<String, String> props = systemCatalogProperties();
      props.put(CatalogProperties.CATALOG_IMPL, "org.apache.iceberg.rest.RESTCatalog");
      props.put(CatalogProperties.URI, args[0]);
      table = org.apache.iceberg.CatalogUtil.buildIcebergCatalog(args[1], props,
          new Configuration()).loadTable(TableIdentifier.parse(args[2]));
    } else {
      System.err.println("usage: IcebergReader METADATA_JSON_LOCATION | JDBC_URI CATALOG "
          + "NAMESPACE.TABLE WAREHOUSE | REST_URI CATALOG NAMESPACE.TABLE");
      System.exit(2);
      return;
    }
    BufferedWriter out =
        new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 16);

    ObjectNode head = JSON.createObjectNode();
    head.put("kind", "table");
    head.put("formatVersion", ((org.apache.iceberg.HasTableOperations) table).operations()
        .current().formatVersion());
    head.put("schema", table.schema().toString());
    head.put("spec", table.spec().toString());
    head.put("sortOrder", table.sortOrder().toString());
    ArrayNode ids = head.putArray("identifierFields");
    for (String name : new java.util.TreeSet<>(table.schema().identifierFieldNames())) {
      ids.add(name);
    }
    Snapshot current = table.currentSnapshot();
    if (current != null) {
      head.put("currentSnapshot", current.snapshotId());
    }
    ArrayNode snaps = head.putArray("snapshots");
    for (Snapshot s : table.snapshots()) {
      ObjectNode n = snaps.addObject();
      n.put("id", s.snapshotId());
      if (s.parentId() != null) {
        n.put("parent", s.parentId());
      }
      n.put("operation", s.operation());
      n.set("summary", JSON.valueToTree(s.summary()));
    }
    out.write(JSON.writeValueAsString(head));
    out.newLine();

    try (CloseableIterable<Record> rows = IcebergGenerics.read(table).build()) {
      for (Record r : rows) {
        ObjectNode o = JSON.createObjectNode();
        o.put("topic", (String) r.getField("topic"));
        o.put("partition", (Integer) r.getField("partition"));
        o.put("offset", (Long) r.getField("offset"));
        OffsetDateTime ts = (OffsetDateTime) r.getField("timestamp");
        o.put("timestamp", ChronoUnit.MICROS.between(Instant.EPOCH, ts.toInstant()));
        o.put("timestampType", (Integer) r.getField("timestampType"));
        // raw bytes as hex; a typed key or value (a struct) as JSON, and any column
        // beyond Kafka's (value_error) under "extra"
        o.set("key", json(r.getField("key")));
        o.set("value", json(r.getField("value")));
        ObjectNode extra = null;
        for (org.apache.iceberg.types.Types.NestedField f : table.schema().columns()) {
          if (!KAFKA_COLUMNS.contains(f.name())) {
            if (extra == null) {
              extra = o.putObject("extra");
            }
            extra.set(f.name(), json(r.getField(f.name())));
          }
        }
        @SuppressWarnings("unchecked")
        List<Record> headers = (List<Record>) r.getField("headers");
        if (headers == null) {
          o.putNull("headers");
        } else {
          ArrayNode hs = o.putArray("headers");
          for (Record h : headers) {
            ArrayNode pair = hs.addArray();
            pair.add((String) h.getField("key"));
            pair.add(hex((ByteBuffer) h.getField("value")));
          }
        }
        out.write(JSON.writeValueAsString(o));
        out.newLine();
      }
    }
    out.flush();
  }

  private static final java.util.Set<String> KAFKA_COLUMNS = java.util.Set.of(
      "topic", "partition", "offset", "timestamp", "timestampType", "key", "value", "headers");

  /** A value Iceberg's generic reader gives, as JSON: structs as objects by field name,
   * lists as arrays, maps as objects, binary as hex, timestamps as epoch microseconds,
   * dates as epoch days, decimals as plain text, anything else as its text. */
  private static com.fasterxml.jackson.databind.JsonNode json(Object v) {
    com.fasterxml.jackson.databind.node.JsonNodeFactory n = JSON.getNodeFactory();
    if (v == null) {
      return n.nullNode();
    }
    if (v instanceof ByteBuffer) {
      return n.textNode(hex((ByteBuffer) v));
    }
    if (v instanceof Record) {
      Record r = (Record) v;
      ObjectNode o = n.objectNode();
      for (org.apache.iceberg.types.Types.NestedField f : r.struct().fields()) {
        o.set(f.name(), json(r.getField(f.name())));
      }
      return o;
    }
    if (v instanceof List) {
      ArrayNode a = n.arrayNode();
      for (Object x : (List<?>) v) {
        a.add(json(x));
      }
      return a;
    }
    if (v instanceof Map) {
      ObjectNode o = n.objectNode();
      for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
        o.set(String.valueOf(e.getKey()), json(e.getValue()));
      }
      return o;
    }
    if (v instanceof Integer) {
      return n.numberNode((Integer) v);
    }
    if (v instanceof Long) {
      return n.numberNode((Long) v);
    }
    if (v instanceof Float) {
      return n.numberNode((Float) v);
    }
    if (v instanceof Double) {
      return n.numberNode((Double) v);
    }
    if (v instanceof Boolean) {
      return n.booleanNode((Boolean) v);
    }
    // temporal values as numbers since the epoch (micros, days), decimals as plain text
    if (v instanceof OffsetDateTime) {
      return n.numberNode(ChronoUnit.MICROS.between(Instant.EPOCH, ((OffsetDateTime) v).toInstant()));
    }
    if (v instanceof java.time.LocalDate) {
      return n.numberNode(((java.time.LocalDate) v).toEpochDay());
    }
    if (v instanceof java.math.BigDecimal) {
      return n.textNode(((java.math.BigDecimal) v).toPlainString());
    }
    return n.textNode(v.toString());
  }

  private static String hex(ByteBuffer buf) {
    if (buf == null) {
      return null;
    }
    ByteBuffer b = buf.duplicate();
    StringBuilder sb = new StringBuilder(b.remaining() * 2);
    while (b.hasRemaining()) {
      sb.append(String.format("%02x", b.get() & 0xff));
    }
    return sb.toString();
  }
}
