"""Reading `GET /metrics` the way Prometheus does (prometheus_client's own text parser)."""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client.parser import text_string_to_metric_families


class Scrape:
    """One exposition: sample values by name and labels (a missing series reads as 0)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._values: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                self._values[(sample.name, frozenset(sample.labels.items()))] = sample.value

    def since(self, earlier: Scrape) -> Scrape:
        """What changed after `earlier`: each series less its earlier value.

        A gateway embedded in the tests counts into the test process's metrics, which every gateway
        that process ran before counted into too, under the same labels when a port came back.
        """
        changed = Scrape("")
        changed._values = {series: value - earlier._values.get(series, 0.0) for series, value in self._values.items()}
        return changed

    def value(self, name: str, **labels: str) -> float:
        return self._values.get((name, frozenset(labels.items())), 0.0)

    def total(self, name: str, **labels: str) -> float:
        """The sum over every series of `name` whose labels include `labels`."""
        wanted = set(labels.items())
        return sum(value for (sample, have), value in self._values.items() if sample == name and wanted <= have)

    def series(self, name: str) -> list[Mapping[str, str]]:
        return [dict(labels) for (sample, labels) in self._values if sample == name]
