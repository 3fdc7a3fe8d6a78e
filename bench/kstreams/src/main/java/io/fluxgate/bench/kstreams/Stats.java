package io.fluxgate.bench.kstreams;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;

/** One window's running statistics: Welford's count, mean and M2, plus min, max and the event-time range. */
final class Stats {
    long count;
    double mean;
    double m2;
    double min = Double.POSITIVE_INFINITY;
    double max = Double.NEGATIVE_INFINITY;
    long firstEventTime = Long.MAX_VALUE;
    long lastEventTime = Long.MIN_VALUE;
    String unit;

    Stats add(Reading reading) {
        double value = reading.value();
        count++;
        double delta = value - mean;
        mean += delta / count;
        m2 += delta * (value - mean);
        min = Math.min(min, value);
        max = Math.max(max, value);
        firstEventTime = Math.min(firstEventTime, reading.eventTime());
        lastEventTime = Math.max(lastEventTime, reading.eventTime());
        if (unit == null) {
            unit = reading.unit();
        }
        return this;
    }

    /** Population standard deviation, 0 for a single reading (the schema's definition). */
    double stddev() {
        return count > 1 ? Math.sqrt(m2 / count) : 0.0;
    }

    static Serde<Stats> serde() {
        Serializer<Stats> serializer = (topic, stats) -> {
            byte[] unit = stats.unit == null ? new byte[0] : stats.unit.getBytes(StandardCharsets.UTF_8);
            ByteBuffer buffer = ByteBuffer.allocate(8 * 7 + 5 + unit.length);
            buffer.putLong(stats.count).putDouble(stats.mean).putDouble(stats.m2).putDouble(stats.min)
                    .putDouble(stats.max).putLong(stats.firstEventTime).putLong(stats.lastEventTime);
            buffer.put((byte) (stats.unit == null ? 0 : 1)).putInt(unit.length).put(unit);
            return buffer.array();
        };
        Deserializer<Stats> deserializer = (topic, data) -> {
            if (data == null) {
                return null;
            }
            ByteBuffer buffer = ByteBuffer.wrap(data);
            Stats stats = new Stats();
            stats.count = buffer.getLong();
            stats.mean = buffer.getDouble();
            stats.m2 = buffer.getDouble();
            stats.min = buffer.getDouble();
            stats.max = buffer.getDouble();
            stats.firstEventTime = buffer.getLong();
            stats.lastEventTime = buffer.getLong();
            boolean hasUnit = buffer.get() == 1;
            byte[] unit = new byte[buffer.getInt()];
            buffer.get(unit);
            stats.unit = hasUnit ? new String(unit, StandardCharsets.UTF_8) : null;
            return stats;
        };
        return Serdes.serdeFrom(serializer, deserializer);
    }
}
