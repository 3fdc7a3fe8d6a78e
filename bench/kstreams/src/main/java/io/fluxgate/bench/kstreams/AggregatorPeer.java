package io.fluxgate.bench.kstreams;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.LongAdder;
import org.apache.avro.Schema;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.LogAndContinueExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.EmitStrategy;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.state.WindowStore;
import org.apache.kafka.streams.state.WindowStoreIterator;

/**
 * The aggregator's job as a Kafka Streams application would write it, for bench/aggregator.py:
 * SensorReadings (wire format) -> temperature only -> dedupe by identity (RocksDB window store)
 * -> 1-minute tumbling windows with a grace period, emitted once on close -> Welford statistics
 * -> TemperatureAggregate (wire format) on its own topic. No late topic, no dead letters.
 *
 * <p>Prints {@code progress <epoch ms> <read> <counted> <duplicates> <emitted>} every 100 ms and
 * {@code state <name>} on each state change, for the bench to follow.
 */
public final class AggregatorPeer {
    static final String METRIC = "temperature";
    static final String DEDUPE_STORE = "dedupe";
    static final LongAdder READ = new LongAdder();
    static final LongAdder COUNTED = new LongAdder();
    static final LongAdder DUPLICATES = new LongAdder();
    static final LongAdder EMITTED = new LongAdder();

    private AggregatorPeer() {}

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = parse(argv);
        String registry = args.get("registry");
        Schema readingSchema = new Schema.Parser().parse(new File(args.get("reading-schema")));
        Schema aggregateSchema = new Schema.Parser().parse(new File(args.get("aggregate-schema")));
        WireFormat wire = new WireFormat(registry, readingSchema);
        if (args.containsKey("describe")) {  // the topology alone, nothing connected (the build's test)
            System.out.println(topology(args, wire, new WireFormat.AggregateEncoder(aggregateSchema, 0)).describe());
            return;
        }
        int aggregateId = wire.register(args.get("output") + "-value", aggregateSchema);
        Topology topology = topology(args, wire, new WireFormat.AggregateEncoder(aggregateSchema, aggregateId));
        KafkaStreams streams = new KafkaStreams(topology, config(args));
        CountDownLatch stopped = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("state " + now);
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                stopped.countDown();
            }
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(20));
            stopped.countDown();
        }));
        Thread reporter = new Thread(AggregatorPeer::report, "progress");
        reporter.setDaemon(true);
        reporter.start();
        streams.start();
        stopped.await();
    }

    static Topology topology(Map<String, String> args, WireFormat wire, WireFormat.AggregateEncoder encoder) {
        Duration size = Duration.ofMillis(Long.parseLong(args.getOrDefault("window-ms", "60000")));
        Duration grace = Duration.ofMillis(Long.parseLong(args.getOrDefault("grace-ms", "30000")));
        // A copy can only matter while its window is open: keep identities for a window plus its grace.
        Duration horizon = size.plus(grace);
        Serde<Reading> readings = Serdes.serdeFrom((topic, reading) -> {
            throw new UnsupportedOperationException("readings are never repartitioned");
        }, wire.readingDeserializer());
        StreamsBuilder builder = new StreamsBuilder();
        builder.addStateStore(Stores.windowStoreBuilder(
                Stores.persistentWindowStore(DEDUPE_STORE, horizon, horizon, false), Serdes.String(), Serdes.Long()));
        builder.stream(args.get("input"), Consumed.with(Serdes.String(), readings)
                        .withTimestampExtractor((record, partitionTime) -> ((Reading) record.value()).eventTime()))
                .peek((key, reading) -> READ.increment())
                .filter((key, reading) -> METRIC.equals(reading.metric()))
                .processValues(Dedupe::new, DEDUPE_STORE)
                .groupByKey(Grouped.with(Serdes.String(), readings))
                .windowedBy(TimeWindows.ofSizeAndGrace(size, grace))
                .emitStrategy(EmitStrategy.onWindowClose())
                // No record cache on the windows: with one, each look for closed windows (every
                // emit interval) copies the cache's keys per segment (NamedCache.keyRange), and a
                // 200,000-reading run stalled there for minutes on the loaded 2-core machine.
                .aggregate(Stats::new, (key, reading, stats) -> stats.add(reading),
                        Materialized.<String, Stats, WindowStore<Bytes, byte[]>>as("windows")
                                .withKeySerde(Serdes.String()).withValueSerde(Stats.serde())
                                .withCachingDisabled())
                .toStream()
                .map((window, stats) -> KeyValue.pair(window.key(),
                        encoder.encode(window.key(), METRIC, window.window(), stats)))
                .peek((key, value) -> EMITTED.increment())
                .to(args.get("output"), Produced.with(Serdes.String(), Serdes.ByteArray()));
        return builder.build();
    }

    static Properties config(Map<String, String> args) throws IOException {
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args.get("application-id"));
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap"));
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, args.getOrDefault("threads", "2"));
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, args.getOrDefault("commit-ms", "1000"));
        props.put(StreamsConfig.STATE_DIR_CONFIG, args.getOrDefault("state-dir",
                Files.createTempDirectory("kstreams-peer-").toString()));
        props.put(StreamsConfig.DESERIALIZATION_EXCEPTION_HANDLER_CLASS_CONFIG, LogAndContinueExceptionHandler.class);
        // How often, at most, closed windows are looked for and emitted (Kafka's internal
        // setting, 1000 ms by default): a record that closes a window emits it no later than this.
        props.put("__emit.interval.ms.kstreams.windowed.aggregation__", args.getOrDefault("emit-interval-ms", "1000"));
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        return props;
    }

    /** Drops a reading whose identity it has seen within the horizon; forwards the rest. */
    static final class Dedupe implements FixedKeyProcessor<String, Reading, Reading> {
        private FixedKeyProcessorContext<String, Reading> context;
        private WindowStore<String, Long> seen;

        @Override
        public void init(FixedKeyProcessorContext<String, Reading> context) {
            this.context = context;
            this.seen = context.getStateStore(DEDUPE_STORE);
        }

        @Override
        public void process(FixedKeyRecord<String, Reading> record) {
            Reading reading = record.value();
            String identity = reading.identity();
            long at = reading.eventTime();
            try (WindowStoreIterator<Long> copies = seen.fetch(identity, at, at)) {
                if (copies.hasNext()) {
                    DUPLICATES.increment();
                    return;
                }
            }
            seen.put(identity, at, at);
            COUNTED.increment();
            context.forward(record);
        }
    }

    private static void report() {
        while (true) {
            System.out.println("progress " + System.currentTimeMillis() + " " + READ.sum() + " " + COUNTED.sum()
                    + " " + DUPLICATES.sum() + " " + EMITTED.sum());
            System.out.flush();
            try {
                Thread.sleep(100);
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    static Map<String, String> parse(String[] argv) {
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            if (!argv[i].startsWith("--")) {
                throw new IllegalArgumentException("expected --name value pairs, got " + argv[i]);
            }
            args.put(argv[i].substring(2), argv[i + 1]);
        }
        for (String required : new String[] {"bootstrap", "registry", "input", "output", "application-id",
                "reading-schema", "aggregate-schema"}) {
            if (!args.containsKey(required)) {
                throw new IllegalArgumentException("--" + required + " is required");
            }
        }
        return args;
    }
}
