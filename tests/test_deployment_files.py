"""The deployment recipe stays consistent with the gateway (no container engine here to run it).

docker-compose.yml is parsed as compose would read it; the Dockerfile and the
nginx configuration are checked for what the README promises of them.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from q2api.settings import ENV_VARIABLES

ROOT = Path(__file__).resolve().parents[1]


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
    balancer = services["balancer"]
    assert balancer["ports"] == ["8000:8000"]
    assert any(volume.startswith("./deploy/nginx.conf:") for volume in balancer["volumes"])


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
