"""The deployment recipes stay consistent with the gateway (no container engine or cluster here to run them).

docker-compose.yml is validated against the Compose Specification's schema and the manifests under
deploy/kubernetes/ against the Kubernetes API's schemas, both shipped in the validators' wheels (no
network); then each is checked for what docs/deployment.md promises of it: the settings it sets
exist, the probes ask the gateway's own endpoints, every name one object uses is another's.
The Dockerfile and the nginx configuration are checked for what the README promises of them.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from check_jsonschema.builtin_schemas import get_builtin_schema

from q2api.settings import ENV_VARIABLES, VARIABLES

ROOT = Path(__file__).resolve().parents[1]
KUBERNETES = ROOT / "deploy" / "kubernetes"
# The oldest Kubernetes release still supported upstream when these were written, and the newest
# the validator knows: a manifest must be valid on both (strict: an unknown field is an error).
KUBERNETES_RELEASES = ("1.31", kubernetes_validate.utils.latest_version())
# `${NAME:-default}` and `${NAME:?message}`, as compose interpolates them from the environment.
INTERPOLATION = re.compile(r"\$\{(?P<name>\w+)(?::(?P<op>[-?])(?P<arg>[^}]*))?\}")


def compose_file() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def interpolated(value: str, environment: dict[str, str]) -> str:
    """`value` as compose reads it with `environment` (a `${NAME:?…}` missing fails as compose does)."""

    def substitute(match: re.Match[str]) -> str:
        given = environment.get(match["name"], "")
        if given or match["op"] is None:
            return given
        if match["op"] == "?":
            raise KeyError(match["arg"])
        return match["arg"]

    return INTERPOLATION.sub(substitute, value)


def manifests() -> list[tuple[str, dict[str, Any]]]:
    """(file name, object) of every Kubernetes object under deploy/kubernetes/, the kustomization aside."""
    found = []
    for path in sorted(KUBERNETES.glob("*.yaml")):
        if path.name != "kustomization.yaml":
            found.extend((path.name, document) for document in yaml.safe_load_all(path.read_text()) if document)
    return found


def kubernetes_object(kind: str, name: str | None = None) -> dict[str, Any]:
    [found] = [doc for _, doc in manifests() if doc["kind"] == kind and name in (None, doc["metadata"]["name"])]
    return found


def test_compose_file_is_valid_against_the_compose_specification() -> None:
    validator = jsonschema.Draft202012Validator(get_builtin_schema("vendor.compose-spec"))
    assert [error.message for error in validator.iter_errors(compose_file())] == []


def test_the_compose_schema_check_refuses_a_broken_file() -> None:
    """The check above can fail: a misspelt key and a wrong type are refused."""
    broken = compose_file()
    broken["services"]["redis"]["healthcheck"]["retires"] = 10
    broken["services"]["gateway1"] = {**broken["services"]["gateway1"], "restart": ["always"]}
    validator = jsonschema.Draft202012Validator(get_builtin_schema("vendor.compose-spec"))
    assert len(list(validator.iter_errors(broken))) >= 2


def test_compose_runs_two_replicas_on_postgres_behind_the_balancer() -> None:
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    gateways = [name for name, service in services.items() if "Q2API_DATABASE_URL" in service.get("environment", {})]
    assert gateways == ["gateway1", "gateway2"]
    for name in gateways:
        environment = services[name]["environment"]
        assert environment["Q2API_DATABASE_URL"].startswith("postgresql://")
        assert "@postgres:5432/" in environment["Q2API_DATABASE_URL"]
        assert "Q2API_SECRET_KEY" in environment
        assert set(environment) <= set(ENV_VARIABLES)  # no misspelt setting silently ignored
        assert services[name]["depends_on"]["postgres"]["condition"] == "service_healthy"
        assert interpolated(environment["AMAZONQ_ENDPOINT"], {}) == ""  # hosts derived per account, with fallback
        assert interpolated(environment["AMAZONQ_ENDPOINT"], {"AMAZONQ_ENDPOINT": "https://h/"}) == "https://h/"
        assert environment["Q2API_REDIS_URL"] == "redis://redis:6379/0"
        assert services[name]["depends_on"]["redis"]["condition"] == "service_healthy"
    balancer = services["balancer"]
    assert balancer["ports"] == ["8000:8000"]
    assert any(volume.startswith("./deploy/nginx.conf:") for volume in balancer["volumes"])


def test_compose_runs_redis_for_the_key_limits_and_keeps_its_counts() -> None:
    compose = compose_file()
    redis = compose["services"]["redis"]
    assert redis["image"].startswith("redis:")
    assert redis["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]
    assert "ports" not in redis  # reachable by the gateways only
    # Monthly credit budgets are counted there: they must survive a restart.
    assert redis["command"] == ["redis-server", "--appendonly", "yes"]
    [volume] = redis["volumes"]
    assert volume.split(":") == ["redis-data", "/data"] and "redis-data" in compose["volumes"]


def test_nginx_balances_both_replicas_without_buffering_streams() -> None:
    config = (ROOT / "deploy" / "nginx.conf").read_text()
    assert re.findall(r"server (gateway\d):8000", config) == ["gateway1", "gateway2"]
    assert "proxy_buffering off;" in config
    assert "proxy_pass http://q2api;" in config


def test_the_image_runs_unprivileged_and_checks_readiness() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^USER q2api$", dockerfile, re.MULTILINE)
    assert re.search(r"^HEALTHCHECK .*\n.*/readyz", dockerfile, re.MULTILINE)
    assert dockerfile.rstrip().endswith('CMD ["q2api", "serve", "--host", "0.0.0.0", "--port", "8000"]')


@pytest.mark.parametrize("release", KUBERNETES_RELEASES)
def test_every_kubernetes_manifest_is_valid_against_the_api_schemas(release: str) -> None:
    kinds = []
    for name, document in manifests():
        try:
            kubernetes_validate.validate(document, release, strict=True)
        except kubernetes_validate.ValidationError as error:
            pytest.fail(f"{name}: {document['kind']} {'.'.join(map(str, error.path))}: {error.message}")
        kinds.append(document["kind"])
    assert sorted(kinds) == [
        "ConfigMap",
        "Deployment",
        "HorizontalPodAutoscaler",
        "PodDisruptionBudget",
        "Secret",
        "Secret",
        "Service",
    ]


def test_the_kubernetes_schema_check_refuses_a_broken_manifest() -> None:
    """The check above can fail: a misspelt field (strict) and a wrong type are refused."""
    misspelt = copy.deepcopy(kubernetes_object("Deployment"))
    container = misspelt["spec"]["template"]["spec"]["containers"][0]
    container["readinesProbe"] = container.pop("readinessProbe")
    wrong_type = copy.deepcopy(kubernetes_object("HorizontalPodAutoscaler"))
    wrong_type["spec"]["minReplicas"] = "two"
    for broken in (misspelt, wrong_type):
        with pytest.raises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(broken, KUBERNETES_RELEASES[-1], strict=True)


def test_the_gateway_deployment_probes_the_gateway_and_asks_for_resources() -> None:
    deployment = kubernetes_object("Deployment")
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    [port] = container["ports"]
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert f"EXPOSE {port['containerPort']}" in dockerfile
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port["name"]}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port["name"]}
    assert container["startupProbe"]["httpGet"] == {"path": "/healthz", "port": port["name"]}
    requests = container["resources"]["requests"]
    assert set(requests) == {"cpu", "memory"}  # the autoscaler measures CPU against the request
    assert "memory" in container["resources"]["limits"]
    # The image's own user (Dockerfile `useradd --uid`), unprivileged, on a read-only root.
    uid = re.search(r"useradd .*--uid (\d+)", dockerfile)
    assert uid and pod["securityContext"]["runAsUser"] == int(uid[1]) and pod["securityContext"]["runAsNonRoot"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    mounts = {mount["mountPath"] for mount in container["volumeMounts"]}
    assert re.search(r"Q2API_DATA_DIR=(\S+)", dockerfile)[1] in mounts and "/tmp" in mounts  # what it writes
    # The graceful shutdown of `q2api serve` fits in the grace period, after the preStop pause.
    serve = (ROOT / "q2api" / "cli" / "main.py").read_text()
    graceful = int(re.search(r"timeout_graceful_shutdown=(\d+)", serve)[1])
    pause = int(container["lifecycle"]["preStop"]["exec"]["command"][1])
    assert pause + graceful < pod["terminationGracePeriodSeconds"]


def test_the_kubernetes_objects_name_each_other() -> None:
    deployment = kubernetes_object("Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    service = kubernetes_object("Service")
    assert service["spec"]["selector"].items() <= labels.items()
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert [port["targetPort"] for port in service["spec"]["ports"]] == [port["name"] for port in container["ports"]]
    assert kubernetes_object("PodDisruptionBudget")["spec"]["selector"]["matchLabels"].items() <= labels.items()
    target = kubernetes_object("HorizontalPodAutoscaler")["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])
    [metric] = kubernetes_object("HorizontalPodAutoscaler")["spec"]["metrics"]
    assert metric["resource"]["name"] == "cpu"
    # Every configMap and Secret the pod reads exists, and holds only settings the gateway has.
    sources = container["envFrom"]
    settings: list[str] = []
    for source in sources:
        if "configMapRef" in source:
            settings.extend(kubernetes_object("ConfigMap", source["configMapRef"]["name"])["data"])
        else:
            settings.extend(kubernetes_object("Secret", source["secretRef"]["name"])["stringData"])
    assert set(settings) <= set(ENV_VARIABLES)
    assert {"Q2API_SECRET_KEY", "Q2API_DATABASE_URL", "Q2API_REDIS_URL", "Q2API_API_KEYS"} <= set(settings)
    assert "AMAZONQ_ENDPOINT" not in settings  # hosts derived per account, with fallback
    # A setting the table calls secret travels in a Secret, never in the ConfigMap.
    secret_settings = {variable.name for variable in VARIABLES if variable.secret}
    assert {"Q2API_SECRET_KEY", "Q2API_DATABASE_URL", "Q2API_API_KEYS"} <= secret_settings
    assert not secret_settings & set(kubernetes_object("ConfigMap")["data"])


def test_the_kustomization_applies_every_manifest_but_the_secret_placeholders() -> None:
    kustomization = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())
    files = {path.name for path in KUBERNETES.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == files - {"secret.example.yaml"}
    [image] = kustomization["images"]
    [container] = kubernetes_object("Deployment")["spec"]["template"]["spec"]["containers"]
    assert container["image"].split(":")[0] == image["name"]


def test_the_example_secret_holds_only_placeholders() -> None:
    for name, document in manifests():
        if document["kind"] == "Secret":
            for key, value in document["stringData"].items():
                assert "REPLACE" in value, (name, key)
