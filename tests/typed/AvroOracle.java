// Apache Avro's own Java library (org.apache.avro:avro from Maven Central; `make
// avro-java-jars`), the reference implementation our Avro decoder and encoder do not use:
// the oracle of tests/typed/test_avro_java.py. One JVM serves many requests: it reads one
// JSON request per line on stdin and answers each with one JSON line on stdout.
//
//   {"op": "encode", "schema": S, "datums": [J, ...], "block": B}
//       each J is a datum in Avro's JSON encoding (a string), read by GenericDatumReader
//       from a JsonDecoder (map entries kept in their JSON order) and written by
//       GenericDatumWriter to binary; with "block" (bytes, >= 32) through the blocking
//       encoder, which writes arrays and maps in blocks of about B bytes, each a negative
//       count followed by its byte size:
//       -> {"binary": [hex, ...]}
//   {"op": "decode", "writer": W, "reader": R, "binary": [hex, ...]}
//       each value read by GenericDatumReader(W, R), i.e. through Avro's ResolvingDecoder,
//       and printed along the reader schema (see `show`); every byte must be consumed:
//       -> {"values": [V, ...]}; with "each": true a value that fails is null and
//       "errors" holds each value's failure (or null)
//   {"op": "compat", "writer": W, "reader": R}
//       SchemaCompatibility.checkReaderWriterCompatibility(R, W):
//       -> {"compatible": true|false, "message": text}
// A failure answers {"error": "Exception: message"} and the JVM goes on.
//
//   javac -cp '.cache/avro-java-jars/*' -d BUILD tests/typed/AvroOracle.java
//   java -cp 'BUILD:.cache/avro-java-jars/*' AvroOracle

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.avro.Conversions;
import org.apache.avro.LogicalType;
import org.apache.avro.Schema;
import org.apache.avro.SchemaCompatibility;
import org.apache.avro.data.TimeConversions;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericFixed;
import org.apache.avro.generic.IndexedRecord;
import org.apache.avro.io.BinaryDecoder;
import org.apache.avro.io.BinaryEncoder;
import org.apache.avro.io.DecoderFactory;
import org.apache.avro.io.EncoderFactory;
import org.apache.avro.io.ResolvingDecoder;

public class AvroOracle {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final JsonNodeFactory N = JsonNodeFactory.instance;
  private static final HexFormat HEX = HexFormat.of();

  /** A union's value with the reader branch the ResolvingDecoder chose. */
  static final class Branch {
    final int index;
    final Object value;

    Branch(int index, Object value) {
      this.index = index;
      this.value = value;
    }
  }

  /**
   * GenericDatumReader as a Java consumer uses it, reading raw values (no conversions: the
   * logical types are converted in `show` with Avro's own Conversion classes), keeping the
   * reader branch of every union and the wire order of map entries.
   */
  static final class Reader extends GenericDatumReader<Object> {
    private final boolean branches;

    /** `branches` false: plain datums (what GenericDatumWriter takes), map order kept. */
    Reader(Schema writer, Schema reader, boolean branches) {
      // the classic reader over ResolvingDecoder: Avro 1.12's default "fast reader" builds
      // its own readers and never calls these overrides
      super(writer, reader, new GenericData().setFastReaderEnabled(false));
      this.branches = branches;
    }

    @Override
    protected Object readWithoutConversion(Object old, Schema expected, ResolvingDecoder in)
        throws IOException {
      if (branches && expected.getType() == Schema.Type.UNION) {
        int index = in.readIndex();
        return new Branch(index, read(null, expected.getTypes().get(index), in));
      }
      return super.readWithoutConversion(old, expected, in);
    }

    @Override
    protected Object newMap(Object old, int size) {
      return new LinkedHashMap<Object, Object>();
    }
  }

  public static void main(String[] args) throws IOException {
    BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
    String line;
    while ((line = in.readLine()) != null) {
      if (line.isBlank()) {
        continue;
      }
      ObjectNode answer;
      try {
        answer = serve(JSON.readTree(line));
      } catch (Exception e) {
        answer = N.objectNode();
        answer.put("error", e.getClass().getSimpleName() + ": " + e.getMessage());
      }
      out.println(JSON.writeValueAsString(answer));
      out.flush();
    }
  }

  static Schema parse(JsonNode text) {
    return new Schema.Parser().parse(text.asText());
  }

  static ObjectNode serve(JsonNode req) throws IOException {
    String op = req.get("op").asText();
    ObjectNode answer = N.objectNode();
    switch (op) {
      case "encode": {
        Schema schema = parse(req.get("schema"));
        Reader reader = new Reader(schema, schema, false);
        GenericDatumWriter<Object> writer = new GenericDatumWriter<>(schema);
        ArrayNode binary = answer.putArray("binary");
        for (JsonNode d : req.get("datums")) {
          Object datum = reader.read(null, DecoderFactory.get().jsonDecoder(schema, d.asText()));
          ByteArrayOutputStream bytes = new ByteArrayOutputStream();
          BinaryEncoder enc = req.has("block")
              ? new EncoderFactory().configureBlockSize(req.get("block").asInt())
                  .blockingBinaryEncoder(bytes, null)
              : EncoderFactory.get().directBinaryEncoder(bytes, null);
          writer.write(datum, enc);
          enc.flush();
          binary.add(HEX.formatHex(bytes.toByteArray()));
        }
        return answer;
      }
      case "decode": {
        Schema w = parse(req.get("writer"));
        Schema r = parse(req.get("reader"));
        Reader reader = new Reader(w, r, true);
        boolean each = req.has("each") && req.get("each").asBoolean();
        ArrayNode values = answer.putArray("values");
        ArrayNode errors = each ? answer.putArray("errors") : null;
        for (JsonNode h : req.get("binary")) {
          byte[] bytes = HEX.parseHex(h.asText());
          try {
            BinaryDecoder dec = DecoderFactory.get().binaryDecoder(bytes, null);
            Object datum = reader.read(null, dec);
            if (!dec.isEnd()) {
              throw new IOException("bytes left after the value: " + h.asText());
            }
            values.add(show(datum, r));
            if (each) {
              errors.addNull();
            }
          } catch (Exception e) {
            if (!each) {
              throw e;
            }
            values.addNull();
            errors.add(e.getClass().getSimpleName() + ": " + e.getMessage());
          }
        }
        return answer;
      }
      case "compat": {
        SchemaCompatibility.SchemaPairCompatibility c =
            SchemaCompatibility.checkReaderWriterCompatibility(
                parse(req.get("reader")), parse(req.get("writer")));
        answer.put("compatible",
            c.getType() == SchemaCompatibility.SchemaCompatibilityType.COMPATIBLE);
        answer.put("message", c.getDescription());
        return answer;
      }
      default:
        throw new IllegalArgumentException("unknown op " + op);
    }
  }

  static JsonNode number(double d) {
    if (Double.isNaN(d)) {
      return N.textNode("NaN");
    }
    if (Double.isInfinite(d)) {
      return N.textNode(d > 0 ? "Infinity" : "-Infinity");
    }
    return N.numberNode(d);
  }

  static JsonNode seconds(Instant t) {
    return N.arrayNode().add(t.getEpochSecond()).add(t.getNano());
  }

  static byte[] bytesOf(ByteBuffer b) {
    ByteBuffer d = b.duplicate();
    byte[] out = new byte[d.remaining()];
    d.get(out);
    return out;
  }

  /**
   * A value read with reader schema `s`, as JSON: a union {"branch": i, "value": v};
   * bytes and fixed as hex; a map as [[key, value], ...] in wire order; a float widened to
   * the double it is exactly; NaN and infinities as strings. Logical types through Avro's
   * own conversions: decimal as the BigDecimal's plain string, date as ISO text,
   * timestamp-millis/-micros as [epoch second, nano] of the Instant, local-timestamp-
   * millis/-micros as [epoch second, nano] of the LocalDateTime read at UTC; the others
   * (time-*, *-nanos, uuid, duration) as their underlying value, which is what Spark keeps.
   */
  static JsonNode show(Object v, Schema s) {
    LogicalType lt = s.getLogicalType();
    String ln = lt == null ? "" : lt.getName();
    switch (s.getType()) {
      case UNION: {
        Branch b = (Branch) v;
        ObjectNode o = N.objectNode();
        o.put("branch", b.index);
        o.set("value", show(b.value, s.getTypes().get(b.index)));
        return o;
      }
      case NULL:
        return N.nullNode();
      case BOOLEAN:
        return N.booleanNode((Boolean) v);
      case INT:
        if (ln.equals("date")) {
          LocalDate d = new TimeConversions.DateConversion().fromInt((Integer) v, s, lt);
          return N.textNode(d.toString());
        }
        return N.numberNode((Integer) v);
      case LONG:
        if (ln.equals("timestamp-millis")) {
          return seconds(new TimeConversions.TimestampMillisConversion().fromLong((Long) v, s, lt));
        }
        if (ln.equals("timestamp-micros")) {
          return seconds(new TimeConversions.TimestampMicrosConversion().fromLong((Long) v, s, lt));
        }
        if (ln.equals("local-timestamp-millis") || ln.equals("local-timestamp-micros")) {
          LocalDateTime t = ln.endsWith("millis")
              ? new TimeConversions.LocalTimestampMillisConversion().fromLong((Long) v, s, lt)
              : new TimeConversions.LocalTimestampMicrosConversion().fromLong((Long) v, s, lt);
          return seconds(t.toInstant(ZoneOffset.UTC));
        }
        return N.numberNode((Long) v);
      case FLOAT:
        return number((double) (Float) v);
      case DOUBLE:
        return number((Double) v);
      case STRING:
        return N.textNode(v.toString());
      case BYTES:
        if (ln.equals("decimal")) {
          return N.textNode(new Conversions.DecimalConversion()
              .fromBytes((ByteBuffer) v, s, lt).toPlainString());
        }
        return N.textNode(HEX.formatHex(bytesOf((ByteBuffer) v)));
      case FIXED:
        if (ln.equals("decimal")) {
          return N.textNode(new Conversions.DecimalConversion()
              .fromFixed((GenericFixed) v, s, lt).toPlainString());
        }
        return N.textNode(HEX.formatHex(((GenericFixed) v).bytes()));
      case ENUM:
        return N.textNode(v.toString());
      case RECORD: {
        ObjectNode o = N.objectNode();
        IndexedRecord r = (IndexedRecord) v;
        for (Schema.Field f : s.getFields()) {
          o.set(f.name(), show(r.get(f.pos()), f.schema()));
        }
        return o;
      }
      case ARRAY: {
        ArrayNode a = N.arrayNode();
        for (Object x : (Iterable<?>) v) {
          a.add(show(x, s.getElementType()));
        }
        return a;
      }
      case MAP: {
        ArrayNode a = N.arrayNode();
        for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
          a.add(N.arrayNode().add(e.getKey().toString()).add(show(e.getValue(), s.getValueType())));
        }
        return a;
      }
      default:
        throw new IllegalArgumentException("no rendering for " + s);
    }
  }
}
