"""The sources of the table: Stream-Reactor's MQTT and CoAP source connectors, run by mqtt-proxy
and coap-ingest. See :mod:`fluxgate_connect.connectors`."""

from __future__ import annotations

from fluxgate_coap_ingest.settings import CoapIngestSettings
from fluxgate_connect.framework import (
    COAP_KCQL,
    COAP_MESSAGE,
    COAP_OUTPUT_FORMAT,
    COAP_SOURCE_CONVERTERS,
    COAP_SOURCE_URI,
    COAP_TASKS,
    MQTT_KCQL,
    MQTT_SOURCE_CONVERTERS,
    MQTT_TASKS,
    SOURCE_ERRORS,
    Connector,
    aliases,
    framework,
)
from fluxgate_connect.rules import (
    Covered,
    Setting,
    Unsupported,
    also_true,
    boolean,
    mqtt_broker,
    mqtt_qos,
    mqtt_qos_note,
    ms_to_seconds,
    ms_to_whole_seconds,
    text,
    to,
)
from fluxgate_mqtt_proxy.settings import ProxySettings

_MQTT = "connect.mqtt"
MQTT_SOURCE = Connector(
    title="MQTT source",
    service="mqtt-proxy",
    script="fluxgate-mqtt-proxy",
    settings=ProxySettings,
    classes=(
        "com.datamountaineer.streamreactor.connect.mqtt.source.MqttSourceConnector",
        "com.datamountaineer.streamreactor.common.mqtt.source.MqttSourceConnector",
        "io.lenses.streamreactor.connect.mqtt.source.MqttSourceConnector",
    ),
    sink=False,
    chart_owned=frozenset({"mqtt.client_id"}),
    rules={
        **framework(sink=False, tasks=MQTT_TASKS, converters=MQTT_SOURCE_CONVERTERS),
        **aliases(to(MQTT_KCQL, text), f"{_MQTT}.kcql", f"{_MQTT}.source.kcql"),
        **aliases(
            Setting(("mqtt.host", "mqtt.port", "mqtt.tls"), mqtt_broker, note="tcp://host:port; ssl:// sets tls"),
            f"{_MQTT}.hosts",
            f"{_MQTT}.connection.hosts",
        ),
        f"{_MQTT}.client.id": to("mqtt.client_id", text),
        **aliases(to("mqtt.username", text), f"{_MQTT}.username", f"{_MQTT}.user"),
        f"{_MQTT}.password": to("mqtt.password", text, secret=True),
        **aliases(to("mqtt.clean_start", boolean), f"{_MQTT}.clean", f"{_MQTT}.connection.clean"),
        **aliases(
            to("mqtt.keepalive_s", ms_to_whole_seconds, note="ms to whole seconds"),
            f"{_MQTT}.keep.alive",
            f"{_MQTT}.connection.keep.alive",
        ),
        **aliases(
            to("mqtt.connect_timeout_s", ms_to_seconds, note="ms to seconds"),
            f"{_MQTT}.timeout",
            f"{_MQTT}.connection.timeout",
        ),
        # connect.mqtt.connection.ssl.*: the 2016 releases' names (datamountaineer docs, mqtt.rst)
        **aliases(also_true("mqtt.ca_file", "mqtt.tls"), f"{_MQTT}.ssl.ca.cert", f"{_MQTT}.connection.ssl.ca.cert"),
        **aliases(also_true("mqtt.cert_file", "mqtt.tls"), f"{_MQTT}.ssl.cert", f"{_MQTT}.connection.ssl.cert"),
        **aliases(also_true("mqtt.key_file", "mqtt.tls"), f"{_MQTT}.ssl.key", f"{_MQTT}.connection.ssl.key"),
        # MqttSourceTask subscribes every KCQL source at this QoS, 0 to 2.
        f"{_MQTT}.service.quality": Setting(
            ("kcql_qos",),
            lambda value: {"kcql_qos": mqtt_qos(value)},
            note="0 is subscribed at 1 (at least once), with a note; 1 and 2 as given",
            says=mqtt_qos_note,
        ),
        **aliases(SOURCE_ERRORS, f"{_MQTT}.error.policy", f"{_MQTT}.max.retries", f"{_MQTT}.retry.interval"),
        # true asks the task to stop on a payload it cannot convert, false to drop it (MqttConfigConstants):
        # either way mqtt-proxy dead-letters it with the reason and goes on, which loses nothing and stops nothing.
        f"{_MQTT}.converter.throw.on.error": Covered(
            "a payload that does not convert is dead-lettered with the reason and the proxy goes on: "
            "neither stopped on (true) nor dropped (false)"
        ),
        f"{_MQTT}.process.duplicates": Covered(
            "a message the broker redelivers (DUP) is processed again: delivery is at least once, and the "
            "persisters' writes are idempotent"
        ),
        # Stream-Reactor 0.3.0 replaced both with KCQL's WITHCONVERTER (its README's renames).
        **aliases(
            Unsupported(
                "write the converter into the KCQL: INSERT INTO <topic> SELECT * FROM <mqtt topic> "
                "WITHCONVERTER=`<class>`"
            ),
            f"{_MQTT}.source.converters",
            f"{_MQTT}.converters",
        ),
        f"{_MQTT}.polling.timeout": Covered("nothing is polled: the broker pushes messages"),
        f"{_MQTT}.share.replicate": Covered(
            "replicas share the subscriptions through one $share group (the chart's shareGroup)", accept=("false",)
        ),
        # true logs every message at INFO (MqttSourceTask), a debugging aid: the run goes on without it.
        f"{_MQTT}.log.message": Covered(
            "messages are counted on /metrics (fluxgate_mqtt_messages_total), not logged one by one; a payload "
            "that does not convert is dead-lettered with its bytes and the reason"
        ),
        **aliases(
            Unsupported(
                "mqtt-proxy writes SensorReading records (schemas/sensor_reading.avsc) from JSON, SenML or CBOR "
                "payloads"
            ),
            "connect.converter.avro.schemas",
            "connect.source.converter.avro.schemas",  # the 2016 releases' name
        ),
    },
)

_COAP = "connect.coap"
_COAP_STORES = ("truststore.path", "truststore.pass", "keystore.path", "keystore.pass", "certs", "cert.chain.key")
_COAP_DTLS = Unsupported(
    "coap-ingest secures CoAP with DTLS pre-shared keys (coaps:// with connect.coap.username and "
    "connect.coap.password, or FLUXGATE_COAP_DTLS__PSK_IDENTITY and FLUXGATE_COAP_DTLS__PSK_KEY), not "
    "certificates, raw public keys or Java key stores"
)
COAP_SOURCE = Connector(
    title="CoAP source",
    service="coap-ingest",
    script="fluxgate-coap-ingest",
    settings=CoapIngestSettings,
    classes=(
        "com.datamountaineer.streamreactor.connect.coap.source.CoapSourceConnector",
        "com.datamountaineer.streamreactor.common.coap.source.CoapSourceConnector",
        "io.lenses.streamreactor.connect.coap.source.CoapSourceConnector",
    ),
    sink=False,
    fixed={COAP_OUTPUT_FORMAT: COAP_MESSAGE},
    rules={
        **framework(sink=False, tasks=COAP_TASKS, converters=COAP_SOURCE_CONVERTERS),
        **aliases(to(COAP_KCQL, text), f"{_COAP}.kcql", f"{_COAP}.source.kcql"),
        **aliases(to(COAP_SOURCE_URI, text), f"{_COAP}.uri", f"{_COAP}.source.uri"),
        **{f"{_COAP}.{where}{name}": _COAP_DTLS for name in _COAP_STORES for where in ("", "source.")},
        # CoapConstants: username is the PSK identity, password the PSK secret (its UTF-8 bytes, as
        # Californium's StaticPskStore takes String.getBytes; coap-ingest encodes the key the same way).
        **aliases(to("dtls.psk_identity", text, note="PSK identity"), f"{_COAP}.username", f"{_COAP}.source.username"),
        **aliases(
            to("dtls.psk_key", text, secret=True, note="PSK secret; the URI must be coaps://"),
            f"{_COAP}.password",
            f"{_COAP}.source.password",
        ),
        **aliases(_COAP_DTLS, f"{_COAP}.public.key.file", f"{_COAP}.private.key.file"),
        **aliases(
            Covered("each notification is produced at once; the Kafka producer batches (linger_ms)"),
            f"{_COAP}.batch.size",
            "connect.source.linger.ms",
        ),
        **aliases(
            Unsupported("coap-ingest is a client only: it binds an ephemeral local port"),
            f"{_COAP}.host",
            f"{_COAP}.port",
            f"{_COAP}.bind.host",
            f"{_COAP}.bind.port",
        ),
        **aliases(
            SOURCE_ERRORS,
            f"{_COAP}.error.policy",
            f"{_COAP}.retry.interval",
            f"{_COAP}.max.retries",
            f"{_COAP}.max.retires",  # sic: the key as Stream-Reactor spelled it
        ),
    },
)
