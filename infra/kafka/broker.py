"""The local Apache Kafka broker: jars from Maven Central, KRaft storage, topics.

Start-up order (each step idempotent):
1. ``ensure_jars``  — ``mvn dependency:copy-dependencies`` into ``infra/kafka/lib`` when missing.
2. ``render_config`` — ``server.properties`` under ``$GPULEDGER_HOME/kafka`` from the template.
3. ``format_storage`` — ``kafka.tools.StorageTool format`` once (skipped when meta.properties exists).
4. the broker process (``kafka.Kafka``), supervised by ``infra.process``.
5. ``ensure_topics`` — creates missing topics with the registry's partition counts.

With ``KAFKA_SECURITY_PROTOCOL=SASL_PLAINTEXT`` the clients' listener authenticates with SCRAM
(``KAFKA_SASL_MECHANISM``, SHA-256 or SHA-512) and the broker talks to itself on a loopback PLAINTEXT
listener (``GPULEDGER_KAFKA_INTERNAL_PORT``). The configured user is created when the storage is
formatted (``--add-scram``) and set again through that loopback listener at every start, so a home
formatted earlier (without SCRAM, or with another password) gets the configured credential too.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import socket
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic, UserScramCredentialUpsertion
from kafka.errors import KafkaError, TopicAlreadyExistsError

from infra.errors import MissingDependency, ServiceError
from infra.process import Service
from pipelines.settings import Settings
from pipelines.topics import all_physical_topics

KAFKA_DIR = Path(__file__).resolve().parent
LIB_DIR = KAFKA_DIR / "lib"
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
# what StorageTool's "--add-scram MECHANISM=[name=…,password=…]" can carry (it has no quoting)
_ADD_SCRAM_VALUE = re.compile(r'[^,\[\]"=\s]+')


def ensure_jars() -> None:
    if any(LIB_DIR.glob("kafka_2.13-*.jar")):
        return
    if shutil.which("mvn") is None:
        raise MissingDependency("Maven (mvn) is needed to fetch the Kafka broker jars: run scripts/setup.sh")
    result = subprocess.run(  # noqa: S603
        ["mvn", "-q", "-B", "-f", str(KAFKA_DIR / "pom.xml"), "dependency:copy-dependencies"],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0 or not any(LIB_DIR.glob("kafka_2.13-*.jar")):
        raise MissingDependency(f"fetching Kafka jars failed: {(result.stdout + result.stderr)[-400:]}")


def _data_dir(settings: Settings) -> Path:
    return (settings.home / "kafka").resolve()


def render_config(settings: Settings) -> Path:
    data = _data_dir(settings)
    data.mkdir(parents=True, exist_ok=True)
    template = (KAFKA_DIR / "server.properties.template").read_text()
    text = template.format(
        controller_port=settings.kafka_controller_port,
        log_dirs=str(data / "log"),
        listeners=_listeners(settings),
    )
    path = data / "server.properties"
    path.write_text(text)
    return path


def scram(settings: Settings) -> bool:
    """The local broker authenticates clients with SCRAM (``KAFKA_SECURITY_PROTOCOL=SASL_PLAINTEXT``)."""
    return settings.kafka_security_protocol == "SASL_PLAINTEXT"


def _listeners(settings: Settings) -> str:
    controller = f"CONTROLLER://127.0.0.1:{settings.kafka_controller_port}"
    protocol = settings.kafka_security_protocol
    if protocol not in ("PLAINTEXT", "SASL_PLAINTEXT"):
        raise ServiceError(
            f"the local broker serves PLAINTEXT or SASL_PLAINTEXT (SCRAM), not {protocol}: "
            "set KAFKA_BOOTSTRAP_SERVERS to a broker that serves it"
        )
    if not scram(settings):
        return "\n".join(
            [
                f"listeners=PLAINTEXT://127.0.0.1:{settings.kafka_port},{controller}",
                f"advertised.listeners=PLAINTEXT://127.0.0.1:{settings.kafka_port}",
                "inter.broker.listener.name=PLAINTEXT",
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            ]
        )
    mechanism = _scram_mechanism(settings)
    clients = f"SASL_PLAINTEXT://127.0.0.1:{settings.kafka_port}"
    internal = f"INTERNAL://127.0.0.1:{settings.kafka_internal_port}"
    return "\n".join(
        [
            f"listeners={clients},{internal},{controller}",
            f"advertised.listeners={clients},{internal}",
            "inter.broker.listener.name=INTERNAL",
            "listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
            f"sasl.enabled.mechanisms={mechanism}",
            f"listener.name.sasl_plaintext.sasl.enabled.mechanisms={mechanism}",
            f"listener.name.sasl_plaintext.{mechanism.lower()}.sasl.jaas.config="
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        ]
    )


def _scram_mechanism(settings: Settings) -> str:
    mechanism = settings.kafka_sasl_mechanism or ""  # Settings requires one with SASL_PLAINTEXT
    if mechanism not in SCRAM_MECHANISMS:
        raise ServiceError(f"the local broker authenticates with {' or '.join(SCRAM_MECHANISMS)}, not {mechanism}")
    return mechanism


def _scram_user(settings: Settings) -> tuple[str, str]:
    user, password = settings.kafka_sasl_username, settings.kafka_sasl_password
    if not user or password is None:  # Settings requires both with SASL_PLAINTEXT
        raise ServiceError("KAFKA_SECURITY_PROTOCOL=SASL_PLAINTEXT needs KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD")
    return user, password.get_secret_value()


def _scram_credential(settings: Settings) -> list[str]:
    """``--add-scram`` for the storage format: the configured user, created with the cluster (a
    name or password StorageTool cannot carry is left to ``_set_credential`` at start)."""
    if not scram(settings):
        return []
    user, password = _scram_user(settings)
    if not (_ADD_SCRAM_VALUE.fullmatch(user) and _ADD_SCRAM_VALUE.fullmatch(password)):
        return []
    return ["--add-scram", f"{_scram_mechanism(settings)}=[name={user},password={password}]"]


def _set_credential(settings: Settings) -> bool:
    """Set the configured user's SCRAM credential through the broker's loopback PLAINTEXT listener
    (an upsert: harmless when it is already that one); False while that listener is not up yet."""
    internal = f"127.0.0.1:{settings.kafka_internal_port}"
    user, password = _scram_user(settings)
    try:
        admin = KafkaAdminClient(bootstrap_servers=internal, bootstrap_timeout_ms=3000, request_timeout_ms=5000)
    except KafkaError:
        return False
    try:
        failed = admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion(user, _scram_mechanism(settings), password)]
        )
    except KafkaError:
        return False
    finally:
        admin.close()
    return not failed.get(user)  # an error message (e.g. the controller still starting): try again


def _ready(settings: Settings) -> Callable[[], bool]:
    """When the started broker is ready: it serves metadata to the configured clients; with SCRAM,
    after the configured credential was set."""
    if not scram(settings):
        return lambda: broker_answers(settings)
    credential_set = False

    def ready() -> bool:
        nonlocal credential_set
        if not credential_set and _answers_tcp("127.0.0.1", settings.kafka_internal_port, 2.0):
            credential_set = _set_credential(settings)
        return credential_set and broker_answers(settings)

    return ready


def _java() -> str:
    java = shutil.which("java")
    if java is None:
        raise MissingDependency("Java 17 is needed for the Kafka broker: run scripts/setup.sh")
    return java


def _classpath() -> str:
    return str(LIB_DIR / "*")


def format_storage(settings: Settings, config: Path) -> None:
    if (_data_dir(settings) / "log" / "meta.properties").exists():
        return
    cluster_id = _cluster_id()
    result = subprocess.run(  # noqa: S603
        [
            _java(),
            "-cp",
            _classpath(),
            "kafka.tools.StorageTool",
            "format",
            "-t",
            cluster_id,
            "-c",
            str(config),
            "--ignore-formatted",
            *_scram_credential(settings),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise ServiceError(f"formatting Kafka storage failed: {(result.stdout + result.stderr).strip()[-400:]}")


def _cluster_id() -> str:
    """A random id as Kafka writes them, never one starting with '-' (the tool would read an option)."""
    import base64

    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def broker_service(settings: Settings) -> Service:
    ensure_jars()
    config = render_config(settings)
    format_storage(settings, config)
    argv = [
        _java(),
        "-Xms256m",
        f"-Xmx{settings.kafka_heap}",
        "-XX:+UseG1GC",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={KAFKA_DIR / 'log4j2.properties'}",
        "-cp",
        _classpath(),
        "kafka.Kafka",
        str(config),
    ]
    return Service(
        name="kafka",
        argv=argv,
        run_dir=settings.run_dir.resolve(),
        log_dir=settings.log_dir.resolve(),
        ready=_ready(settings),
        start_timeout_s=90.0,
        stop_timeout_s=30.0,
        identity={
            "KAFKA_PORT": str(settings.kafka_port),
            "KAFKA_CONTROLLER_PORT": str(settings.kafka_controller_port),
            "KAFKA_SECURITY_PROTOCOL": settings.kafka_security_protocol,
        },
    )


def _answers_tcp(host: str, port: int, timeout_s: float) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def broker_answers(settings: Settings, timeout_s: float = 2.0) -> bool:
    """True when the broker accepts connections and serves metadata (to these credentials)."""
    host, _, port = settings.bootstrap_servers.split(",")[0].rpartition(":")
    if not _answers_tcp(host, int(port), timeout_s):
        return False
    try:
        admin = KafkaAdminClient(
            **settings.kafka_client_config(),
            bootstrap_timeout_ms=int(timeout_s * 1000) + 3000,
            request_timeout_ms=int(timeout_s * 1000) + 3000,
        )
    except KafkaError:
        return False
    try:
        admin.list_topics()
        return True
    except KafkaError:
        return False
    finally:
        admin.close()


def ensure_topics(settings: Settings) -> list[str]:
    """Create the registry's topics that are missing; returns the names created."""
    admin = KafkaAdminClient(**settings.kafka_client_config())
    try:
        existing = set(admin.list_topics())
        retention = {"retention.ms": str(settings.topic_retention_ms)}  # explicit: a replay needs the log
        wanted = [
            NewTopic(name, partitions, 1, topic_configs={"cleanup.policy": "compact"} if compacted else retention)
            for name, partitions, compacted in all_physical_topics(settings)
            if name not in existing
        ]
        if wanted:
            with contextlib.suppress(TopicAlreadyExistsError):  # another process created them first
                admin.create_topics(wanted)
        return [t.name for t in wanted]
    finally:
        admin.close()


def end_offsets(settings: Settings) -> dict[str, int]:
    """Total end offset (messages written) of each registry topic present on the broker."""
    consumer = KafkaConsumer(**settings.kafka_client_config())
    try:
        present = consumer.topics()
        out: dict[str, int] = {}
        for name, _, _ in all_physical_topics(settings):
            if name not in present:
                continue
            parts = consumer.partitions_for_topic(name) or set()
            offsets = consumer.end_offsets([TopicPartition(name, p) for p in parts])
            out[name] = sum(offsets.values())
        return out
    finally:
        consumer.close()
