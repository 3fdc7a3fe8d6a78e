package io.fluxgate.bench.kstreams;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.BinaryDecoder;
import org.apache.avro.io.BinaryEncoder;
import org.apache.avro.io.DecoderFactory;
import org.apache.avro.io.EncoderFactory;
import org.apache.kafka.common.errors.SerializationException;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.streams.kstream.Window;

/**
 * Confluent wire format (magic byte 0, a 4-byte schema id, Avro binary) without Confluent's serdes:
 * writer schemas fetched by id from the registry's ccompat API and cached, as the job's decoder does.
 */
final class WireFormat {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final String registryUrl;
    private final HttpClient http = HttpClient.newHttpClient();
    private final Schema readingSchema;
    private final Map<Integer, GenericDatumReader<GenericRecord>> readers = new ConcurrentHashMap<>();

    WireFormat(String registryUrl, Schema readingSchema) {
        this.registryUrl = registryUrl.replaceAll("/+$", "");
        this.readingSchema = readingSchema;
    }

    /** SensorReading values, decoded with the writer's schema resolved to ours (the repo's schema file). */
    Deserializer<Reading> readingDeserializer() {
        // One serde instance serves every stream thread: each thread keeps its own decoder and record.
        ThreadLocal<BinaryDecoder> decoders = new ThreadLocal<>();
        ThreadLocal<GenericRecord> records = new ThreadLocal<>();
        return new Deserializer<>() {
            @Override
            public Reading deserialize(String topic, byte[] data) {
                if (data == null || data.length < 5 || data[0] != 0) {
                    throw new SerializationException("not Confluent wire format");
                }
                int id = ByteBuffer.wrap(data, 1, 4).getInt();
                BinaryDecoder decoder = DecoderFactory.get().binaryDecoder(data, 5, data.length - 5, decoders.get());
                decoders.set(decoder);
                GenericRecord reuse;
                try {
                    reuse = readers.computeIfAbsent(id, WireFormat.this::reader).read(records.get(), decoder);
                } catch (IOException | RuntimeException e) {
                    throw new SerializationException("schema " + id + ": " + e, e);
                }
                records.set(reuse);
                Object unit = reuse.get("unit");
                Object sequence = reuse.get("sequence");
                return new Reading(reuse.get("device_id").toString(), reuse.get("metric").toString(),
                        (Double) reuse.get("value"), unit == null ? null : unit.toString(),
                        (Long) reuse.get("event_time"), (Long) sequence);
            }
        };
    }

    private GenericDatumReader<GenericRecord> reader(int id) {
        try {
            String text = get("/schemas/ids/" + id).get("schema").asText();
            return new GenericDatumReader<>(new Schema.Parser().parse(text), readingSchema);
        } catch (IOException e) {
            throw new SerializationException("schema " + id + " from " + registryUrl + ": " + e, e);
        }
    }

    /** Registers ``schema`` under ``subject`` (or finds it registered) and returns its id. */
    int register(String subject, Schema schema) throws IOException, InterruptedException {
        String body = JSON.writeValueAsString(Map.of("schema", schema.toString()));
        HttpRequest request = HttpRequest.newBuilder(URI.create(registryUrl + "/subjects/" + subject + "/versions"))
                .header("Content-Type", "application/vnd.schemaregistry.v1+json")
                .POST(HttpRequest.BodyPublishers.ofString(body)).build();
        HttpResponse<String> response = http.send(request, HttpResponse.BodyHandlers.ofString());
        if (response.statusCode() / 100 != 2) {
            throw new IOException("register " + subject + ": HTTP " + response.statusCode() + " " + response.body());
        }
        return JSON.readTree(response.body()).get("id").asInt();
    }

    private com.fasterxml.jackson.databind.JsonNode get(String path) throws IOException {
        HttpRequest request = HttpRequest.newBuilder(URI.create(registryUrl + path)).GET().build();
        try {
            HttpResponse<String> response = http.send(request, HttpResponse.BodyHandlers.ofString());
            if (response.statusCode() / 100 != 2) {
                throw new IOException("GET " + path + ": HTTP " + response.statusCode());
            }
            return JSON.readTree(response.body());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException(e);
        }
    }

    /** TemperatureAggregate records in wire format under one registered schema id. */
    static final class AggregateEncoder {
        private final Schema schema;
        private final byte[] header;
        private final GenericDatumWriter<GenericRecord> writer;
        private final ThreadLocal<BinaryEncoder> encoders = new ThreadLocal<>();

        AggregateEncoder(Schema schema, int id) {
            this.schema = schema;
            this.header = ByteBuffer.allocate(5).put((byte) 0).putInt(id).array();
            this.writer = new GenericDatumWriter<>(schema);
        }

        byte[] encode(String deviceId, String metric, Window window, Stats stats) {
            GenericRecord record = new GenericData.Record(schema);
            record.put("device_id", deviceId);
            record.put("metric", metric);
            record.put("window_start", window.start());
            record.put("window_end", window.end());
            record.put("count", stats.count);
            record.put("min", stats.min);
            record.put("max", stats.max);
            record.put("mean", stats.mean);
            record.put("stddev", stats.stddev());
            record.put("first_event_time", stats.firstEventTime);
            record.put("last_event_time", stats.lastEventTime);
            record.put("unit", stats.unit);
            ByteArrayOutputStream out = new ByteArrayOutputStream(96);
            out.writeBytes(header);
            BinaryEncoder encoder = EncoderFactory.get().binaryEncoder(out, encoders.get());
            encoders.set(encoder);
            try {
                writer.write(record, encoder);
                encoder.flush();
            } catch (IOException e) {
                throw new SerializationException(e);
            }
            return out.toByteArray();
        }
    }
}
