package io.fluxgate.bench.kstreams;

/** The fields of a SensorReading the aggregation reads; {@code unit} and {@code sequence} may be null. */
record Reading(String deviceId, String metric, double value, String unit, long eventTime, Long sequence) {

    /** A reading's identity, as the job's dedupe has it: (device_id, metric, event_time, value, sequence). */
    String identity() {
        return deviceId + '\u0000' + metric + '\u0000' + eventTime + '\u0000'
                + Double.doubleToLongBits(value) + '\u0000' + sequence;
    }
}
