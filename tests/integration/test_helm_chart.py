"""The Helm chart (infra/helm/gpuledger): linted with ``helm lint --strict``, rendered with the
default values and with every option on, and every rendered object decoded strictly into its
Kubernetes API type by ``manifestcheck`` (client-go's scheme and the Prometheus Operator's types:
an unknown field fails). Then what the objects say: the collector's RBAC, the PodResources
DaemonSet, non-root containers, one image, the copies of the alert rules and the dashboard.

helm (built from its Go module) and manifestcheck (tools/manifestcheck) are built by
``scripts/test-setup.d/helm.sh`` into ~/.cache/gpuledger/bin."""

from __future__ import annotations

import os
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "infra/helm/gpuledger"
ALL_OPTIONS = CHART / "ci/all-options-values.yaml"
BIN = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpuledger" / "bin"
VARIANTS = {
    "default": [],
    "all-options": ["-f", str(ALL_OPTIONS)],
    # the single collector with its state on a volume, Dagster on an existing PostgreSQL, a
    # Secret written by the chart
    "persistent-external": [
        "--set",
        "collectors.kubernetes.persistence.enabled=true",
        "--set",
        "dagster.postgresql.bundled=false",
        "--set",
        "dagster.postgresql.host=pg.db.svc",
        "--set",
        "secrets.create=true",
        "--set",
        "secrets.values.CLICKHOUSE_PASSWORD=x",
    ],
    # a writable Dagster webserver, exports on one's own claim, serve's tokens from a Secret's file
    "admin": ["-f", str(CHART / "ci/admin-values.yaml")],
    # the emptyDir for exports and no NetworkPolicy, each by a value
    "ephemeral-open": [
        "--set",
        "dagster.exports.persistence.enabled=false",
        "--set",
        "networkPolicy.enabled=false",
    ],
}
WORKLOADS = ("Deployment", "DaemonSet", "StatefulSet", "Job")


def tool(name: str) -> Path:
    path = BIN / name
    if not path.exists():
        pytest.fail(f"{path} is missing: run bash scripts/setup-tests.sh (scripts/test-setup.d/helm.sh builds it)")
    return path


@pytest.fixture(scope="module")
def helm_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """helm with its own cache, config and data: it reads or writes nothing of the machine's."""
    home = tmp_path_factory.mktemp("helm")
    return {
        **os.environ,
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }


def helm(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(tool("helm")), *args], capture_output=True, text=True, env=env, timeout=120, check=False)


def render(env: dict[str, str], variant: str) -> str:
    done = helm(env, "template", "gl", str(CHART), "--namespace", "gpuledger", *VARIANTS[variant])
    assert done.returncode == 0, done.stderr
    return done.stdout


def objects(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def check(text: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(tool("manifestcheck")), "k8s", "-"], input=text, capture_output=True, text=True, timeout=120, check=False
    )


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = obj["spec"]["template"]["spec"]
    return spec


@pytest.fixture(scope="module")
def rendered(helm_env: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
    return {variant: objects(render(helm_env, variant)) for variant in VARIANTS}


@pytest.mark.parametrize("variant", ["default", "all-options", "admin"])
def test_the_chart_lints_strictly(helm_env: dict[str, str], variant: str) -> None:
    done = helm(helm_env, "lint", "--strict", str(CHART), *VARIANTS[variant])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 chart(s) failed" in done.stdout and "[WARNING]" not in done.stdout and "[ERROR]" not in done.stdout


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_rendered_object_decodes_strictly_into_its_api_type(helm_env: dict[str, str], variant: str) -> None:
    text = render(helm_env, variant)
    done = check(text)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == len(objects(text)) and all(line.startswith("ok ") for line in lines)


def test_the_validator_refuses_unknown_fields_and_kinds() -> None:
    deployment: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "x"},
        "spec": {
            "selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
        },
    }
    assert check(yaml.safe_dump(deployment)).returncode == 0
    typo = yaml.safe_dump({**deployment, "spec": {**deployment["spec"], "replica": 2}})
    done = check(typo)
    assert done.returncode == 1 and 'unknown field "spec.replica"' in done.stdout
    template: dict[str, Any] = deployment["spec"]["template"]
    bad_container = {
        **deployment,
        "spec": {
            **deployment["spec"],
            "template": {
                **template,
                "spec": {"containers": [{"name": "c", "image": "i", "imagePullPolicyy": "Always"}]},
            },
        },
    }
    done = check(yaml.safe_dump(bad_container))
    assert done.returncode == 1 and "imagePullPolicyy" in done.stdout
    rule = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "r"},
        "spec": {"groups": [{"name": "g", "rules": [{"alert": "A", "expr": "up == 0", "fore": "5m"}]}]},
    }
    done = check(yaml.safe_dump(rule))
    assert done.returncode == 1 and "fore" in done.stdout
    done = check(yaml.safe_dump({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}))
    assert done.returncode == 1 and "unknown apiVersion/kind" in done.stdout
    done = check("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\nmetadata: {name: b}\n")
    assert done.returncode == 1  # a duplicated key


def test_the_collector_may_only_read_pods_nodes_and_gpu_claims(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for variant, objs in rendered.items():
        roles = [o for o in objs if o["kind"] in ("Role", "ClusterRole")]
        assert len(roles) == 1, variant
        grants = {
            (group, resource, verb)
            for rule in roles[0]["rules"]
            for group in rule.get("apiGroups", [])
            for resource in rule.get("resources", [])
            for verb in rule.get("verbs", [])
        }
        # pods and nodes watched; DRA ResourceClaims and ResourceSlices listed at every poll
        assert grants == {("", r, v) for r in ("pods", "nodes") for v in ("get", "list", "watch")} | {
            ("resource.k8s.io", r, v) for r in ("resourceclaims", "resourceslices") for v in ("get", "list")
        }, variant
        assert all(set(rule) <= {"apiGroups", "resources", "verbs"} for rule in roles[0]["rules"]), variant
        bindings = [o for o in objs if o["kind"] in ("RoleBinding", "ClusterRoleBinding")]
        assert [b["roleRef"]["name"] for b in bindings] == [roles[0]["metadata"]["name"]]
        account = bindings[0]["subjects"][0]["name"]
        users = {
            o["metadata"]["name"]
            for o in objs
            if o["kind"] in WORKLOADS and pod_spec(o).get("serviceAccountName") == account
        }
        assert users and all("collector-" in name for name in users), variant
        # no other pod carries an API token
        for o in objs:
            if o["kind"] in WORKLOADS and o["metadata"]["name"] not in users:
                assert pod_spec(o).get("automountServiceAccountToken") is False, o["metadata"]["name"]


def test_pod_resources_runs_one_collector_per_gpu_node_instead_of_the_single_one(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    def collectors(variant: str) -> dict[str, dict[str, Any]]:
        names = ("collector-podresources", "collector-kubernetes")
        return {
            o["kind"]: o
            for o in rendered[variant]
            if o["kind"] in WORKLOADS and any(n in o["metadata"]["name"] for n in names)
        }

    single = collectors("default")
    assert set(single) == {"Deployment"} and single["Deployment"]["spec"]["replicas"] == 1
    per_node = collectors("all-options")
    assert set(per_node) == {"DaemonSet"}
    spec = pod_spec(per_node["DaemonSet"])
    command = spec["containers"][0]["command"]
    assert "--node-name=$(NODE_NAME)" in command
    assert "--pod-resources-socket=/var/lib/kubelet/pod-resources/kubelet.sock" in command
    env = {e["name"]: e for e in spec["containers"][0]["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    host = {v["name"]: v for v in spec["volumes"] if "hostPath" in v}
    assert [v["hostPath"]["path"] for v in host.values()] == ["/var/lib/kubelet/pod-resources"]
    mounts = {m["name"]: m for m in spec["containers"][0]["volumeMounts"]}
    assert all(mounts[name]["readOnly"] is True for name in host)
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}


def test_containers_run_unprivileged_from_one_image(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for variant, objs in rendered.items():
        images = set()
        for o in (o for o in objs if o["kind"] in WORKLOADS):
            spec = pod_spec(o)
            name = o["metadata"]["name"]
            for c in spec["containers"]:
                sc = c.get("securityContext", {})
                assert sc.get("allowPrivilegeEscalation") is False, (variant, name)
                assert sc.get("capabilities", {}).get("drop") == ["ALL"], (variant, name)
                assert sc.get("readOnlyRootFilesystem") is True, (variant, name)
                if "podresources" in name:  # the kubelet socket is root's: documented in values.yaml
                    assert sc.get("runAsUser") == 0
                    continue
                user = sc.get("runAsUser", spec.get("securityContext", {}).get("runAsUser"))
                assert user not in (None, 0), (variant, name)
                assert sc.get("runAsNonRoot", spec.get("securityContext", {}).get("runAsNonRoot")) is True
                if "postgresql" not in name:
                    images.add(c["image"])
                    assert c.get("resources", {}).get("requests"), (variant, name)
        assert len(images) == 1, (variant, images)


def test_probes_on_every_long_running_gpuledger_container(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for o in rendered["all-options"]:
        if o["kind"] in ("Deployment", "DaemonSet", "StatefulSet") and "daemon" not in o["metadata"]["name"]:
            c = pod_spec(o)["containers"][0]
            assert "readinessProbe" in c and "livenessProbe" in c, o["metadata"]["name"]


def test_secrets_come_only_from_the_secret(rendered: dict[str, list[dict[str, Any]]]) -> None:
    secret_names = {
        "KAFKA_SASL_PASSWORD",
        "CLICKHOUSE_PASSWORD",
        "CLICKHOUSE_READER_PASSWORD",
        "GPULEDGER_API_TOKENS",
        "DAGSTER_PG_PASSWORD",
        "POSTGRES_PASSWORD",
    }
    for variant, objs in rendered.items():
        for o in objs:
            if o["kind"] == "ConfigMap":
                assert not secret_names & set(o.get("data", {})), (variant, o["metadata"]["name"])
            if o["kind"] in WORKLOADS:
                for c in pod_spec(o)["containers"]:
                    for e in c.get("env", []):
                        if e["name"] in secret_names:
                            assert "value" not in e and "secretKeyRef" in e["valueFrom"], (variant, e["name"])
    default_secret = [o for o in rendered["default"] if o["kind"] == "Secret"]
    written = [o for o in rendered["persistent-external"] if o["kind"] == "Secret"]
    assert default_secret == [] and written[0]["stringData"] == {"CLICKHOUSE_PASSWORD": "x"}


def test_the_chart_version_and_its_copies_follow_the_project() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert chart["appVersion"] == project["version"]
    assert (CHART / "files/alerts.yml").read_bytes() == (REPO / "infra/prometheus/alerts.yml").read_bytes()
    assert (CHART / "files/gpuledger.json").read_bytes() == (REPO / "infra/grafana/gpuledger.json").read_bytes()


def test_the_alert_rules_and_the_dashboard_reach_the_cluster_whole(rendered: dict[str, list[dict[str, Any]]]) -> None:
    rules = next(o for o in rendered["all-options"] if o["kind"] == "PrometheusRule")
    assert rules["spec"] == yaml.safe_load((REPO / "infra/prometheus/alerts.yml").read_text())
    board = next(o for o in rendered["all-options"] if o["kind"] == "ConfigMap" and "gpuledger.json" in o["data"])
    assert board["data"]["gpuledger.json"] == (REPO / "infra/grafana/gpuledger.json").read_text().rstrip("\n")
    assert board["metadata"]["labels"]["grafana_dashboard"] == "1"


def test_the_values_schema_refuses_typos(helm_env: dict[str, str]) -> None:
    done = helm(helm_env, "template", "gl", str(CHART), "--set", "workerz.replicas=3")
    assert done.returncode != 0 and "workerz" in done.stderr
    done = helm(helm_env, "template", "gl", str(CHART), "--set", "kafka.securityProtocol=SASL_SSSL")
    assert done.returncode != 0 and "securityProtocol" in done.stderr
    for bad in (
        "serve.tokensSecret.nmae=t",
        "serve.tokensSecret.name=Tokens_File",
        "dagster.exports.persistence.size=ten",
        "dagster.exports.persistence.accessModes={ReadOnlyMany}",
        "dagster.webserver.readOnly=maybe",
        "networkPolicy.apiServerPorts={70000}",
    ):
        done = helm(helm_env, "template", "gl", str(CHART), "--set", bad)
        assert done.returncode != 0 and "values don't meet the specifications of the schema" in done.stderr, bad


def workload(objs: list[dict[str, Any]], component: str) -> dict[str, Any]:
    found = [o for o in objs if o["kind"] in WORKLOADS and o["metadata"]["name"].endswith(f"-{component}")]
    assert len(found) == 1, (component, [o["metadata"]["name"] for o in found])
    return found[0]


def test_the_dagster_webserver_is_read_only_unless_an_admin_turns_writes_on(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    for variant in ("default", "all-options", "persistent-external", "ephemeral-open"):
        command = pod_spec(workload(rendered[variant], "dagster-webserver"))["containers"][0]["command"]
        assert command[0] == "dagster-webserver" and "--read-only" in command, variant
    command = pod_spec(workload(rendered["admin"], "dagster-webserver"))["containers"][0]["command"]
    assert command[0] == "dagster-webserver" and "--read-only" not in command
    # the daemon has no such flag: it is what launches the scheduled runs
    assert "--read-only" not in pod_spec(workload(rendered["default"], "dagster-daemon"))["containers"][0]["command"]


def exports_volume(objs: list[dict[str, Any]]) -> dict[str, Any]:
    """The volume mounted where the daemon's runs write the FOCUS files (<GPULEDGER_HOME>/exports)."""
    spec = pod_spec(workload(objs, "dagster-daemon"))
    env = next(o for o in objs if o["kind"] == "ConfigMap" and "GPULEDGER_HOME" in o.get("data", {}))["data"]
    where = f"{env['GPULEDGER_HOME']}/exports"
    mounts = [m for m in spec["containers"][0]["volumeMounts"] if m["mountPath"] == where]
    assert len(mounts) == 1 and not mounts[0].get("readOnly"), where
    return next(v for v in spec["volumes"] if v["name"] == mounts[0]["name"])


def test_the_focus_exports_are_written_to_a_persistent_volume_claim(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    claims = {}
    for variant in ("default", "all-options", "persistent-external"):
        objs = rendered[variant]
        claim = exports_volume(objs)["persistentVolumeClaim"]["claimName"]
        pvc = [o for o in objs if o["kind"] == "PersistentVolumeClaim" and o["metadata"]["name"] == claim]
        assert len(pvc) == 1, (variant, claim)
        assert pvc[0]["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
        claims[variant] = pvc[0]["spec"]
    # the size, class and access modes are values; no class: the cluster's default
    assert claims["default"] == {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}
    assert claims["all-options"] == {
        "accessModes": ["ReadWriteOncePod"],
        "storageClassName": "standard",
        "resources": {"requests": {"storage": "50Gi"}},
    }
    # one's own claim: mounted, none written by the chart
    admin = rendered["admin"]
    assert exports_volume(admin) == {"name": "exports", "persistentVolumeClaim": {"claimName": "finance-exports"}}
    assert not [o for o in admin if o["kind"] == "PersistentVolumeClaim"]
    # turned off by a value: an emptyDir, and no claim
    assert "emptyDir" in exports_volume(rendered["ephemeral-open"])
    assert not [o for o in rendered["ephemeral-open"] if o["kind"] == "PersistentVolumeClaim"]


def test_serve_reads_hashed_tokens_from_a_secret_mounted_read_only(rendered: dict[str, list[dict[str, Any]]]) -> None:
    spec = pod_spec(workload(rendered["admin"], "serve"))
    container = spec["containers"][0]
    files = [a.removeprefix("--tokens-file=") for a in container["command"] if a.startswith("--tokens-file=")]
    assert len(files) == 1
    mount = next(m for m in container["volumeMounts"] if files[0].startswith(m["mountPath"] + "/"))
    assert mount["readOnly"] is True
    volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    assert volume["secret"]["secretName"] == "gpuledger-tokens"
    assert volume["secret"]["items"] == [{"key": "tokens", "path": files[0].removeprefix(mount["mountPath"] + "/")}]
    assert volume["secret"]["defaultMode"] & 0o007 == 0  # not world-readable
    # and no plain tokens in its environment then
    assert "GPULEDGER_API_TOKENS" not in {e["name"] for e in container["env"]}
    # without tokensSecret, the compatible (lesser) way: the variable from the Secret, no file
    container = pod_spec(workload(rendered["default"], "serve"))["containers"][0]
    assert not [a for a in container["command"] if a.startswith("--tokens-file")]
    assert "GPULEDGER_API_TOKENS" in {e["name"] for e in container["env"]}


def test_the_trusted_proxy_header_reaches_serve_only_when_set(rendered: dict[str, list[dict[str, Any]]]) -> None:
    env = {
        e["name"]: e.get("value") for e in pod_spec(workload(rendered["all-options"], "serve"))["containers"][0]["env"]
    }
    assert env["GPULEDGER_TRUSTED_USER_HEADER"] == "X-Forwarded-Email"
    assert env["GPULEDGER_TRUSTED_USERS"].startswith("finance@example.com=all,")
    for variant in ("default", "admin"):  # off by default
        names = {e["name"] for e in pod_spec(workload(rendered[variant], "serve"))["containers"][0]["env"]}
        assert not [n for n in names if n.startswith("GPULEDGER_TRUSTED_")], variant


def egress_ports(policy: dict[str, Any]) -> set[tuple[int, str]]:
    """The (port, protocol) pairs some egress rule of the policy allows (to whichever peers it names)."""
    return {(p["port"], p.get("protocol", "TCP")) for rule in policy["spec"]["egress"] for p in rule.get("ports", [])}


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    assert set(selector) == {"matchLabels"}, selector  # the chart writes no matchExpressions
    return all(labels.get(k) == v for k, v in selector["matchLabels"].items())


def test_the_network_policy_is_on_and_lets_every_component_reach_what_it_needs(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    needs = {
        # DNS; Kafka, ClickHouse and Prometheus at the values' ports; the API server for the collectors
        "default": {(53, "UDP"), (53, "TCP"), (9092, "TCP"), (8123, "TCP"), (9090, "TCP"), (443, "TCP"), (6443, "TCP")},
        "persistent-external": {(9092, "TCP"), (8123, "TCP"), (5432, "TCP"), (443, "TCP")},  # PostgreSQL outside
        "admin": {(9093, "TCP"), (9094, "TCP"), (8443, "TCP"), (9090, "TCP")},  # every broker; ClickHouse's https port
        "all-options": {(53, "UDP"), (9093, "TCP"), (8443, "TCP"), (9090, "TCP"), (6443, "TCP")},  # its own rules
    }
    for variant, wanted in needs.items():
        objs = rendered[variant]
        policies = [o for o in objs if o["kind"] == "NetworkPolicy"]
        assert len(policies) == 1, variant
        policy = policies[0]
        assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
        assert wanted <= egress_ports(policy), (variant, wanted - egress_ports(policy))
        # it covers every pod of the release, and the release's pods reach each other (the bundled
        # PostgreSQL from Dagster, on any port) both ways
        pods = [
            (o["metadata"]["name"], o["spec"]["template"]["metadata"]["labels"]) for o in objs if o["kind"] in WORKLOADS
        ]
        pods += [(o["metadata"]["name"], o["metadata"].get("labels", {})) for o in objs if o["kind"] == "Pod"]
        assert pods and all(selects(policy["spec"]["podSelector"], labels) for _, labels in pods), variant
        for direction, peer_key in (("ingress", "from"), ("egress", "to")):
            internal = [
                rule
                for rule in policy["spec"][direction]
                if "ports" not in rule
                and any("podSelector" in p and "namespaceSelector" not in p for p in rule[peer_key])
            ]
            assert internal, (variant, direction)
            for _, labels in pods:
                assert any(selects(p["podSelector"], labels) for rule in internal for p in rule[peer_key])
    # the ports derived from the settings are dropped by a value: then every rule but DNS names its peers
    tight = next(o for o in rendered["all-options"] if o["kind"] == "NetworkPolicy")
    open_rules = [rule for rule in tight["spec"]["egress"] if "to" not in rule]
    assert [{p["port"] for p in rule["ports"]} for rule in open_rules] == [{53}]
    assert not [o for o in rendered["ephemeral-open"] if o["kind"] == "NetworkPolicy"]


def test_a_clickhouse_cluster_name_reaches_the_migrations_only_when_set(
    rendered: dict[str, list[dict[str, Any]]], helm_env: dict[str, str]
) -> None:
    def settings(variant: str) -> dict[str, str]:
        maps = [o for o in rendered[variant] if o["kind"] == "ConfigMap" and "CLICKHOUSE_DATABASE" in o.get("data", {})]
        assert len(maps) == 1
        data: dict[str, str] = maps[0]["data"]
        return data

    assert settings("all-options")["CLICKHOUSE_CLUSTER"] == "gpu_fleet"
    assert "CLICKHOUSE_CLUSTER" not in settings("default")
    done = helm(helm_env, "template", "gl", str(CHART), "--set", "clickhouse.cluster=a`b")
    assert done.returncode != 0 and "cluster" in done.stderr


def test_the_owner_label_keys_reach_every_process(rendered: dict[str, list[dict[str, Any]]]) -> None:
    def settings(variant: str) -> dict[str, str]:
        [config] = [o for o in rendered[variant] if o["kind"] == "ConfigMap" and "GPULEDGER_CLUSTER" in o["data"]]
        return dict(config["data"])

    assert (settings("default")["GPULEDGER_TEAM_LABEL_KEYS"], settings("default")["GPULEDGER_MODEL_LABEL_KEYS"]) == (
        "team",
        "model",
    )
    custom = settings("all-options")
    assert custom["GPULEDGER_TEAM_LABEL_KEYS"] == "app.kubernetes.io/part-of,cost-center,team"
    assert custom["GPULEDGER_MODEL_LABEL_KEYS"] == "gpuledger.io/model,model"
