"""How the gateway benchmark prints: sections of label | figure | target rows, and the targets met or MISSED.

Rows are printed as each section ends, so a long run shows its figures as it
goes; every verdict is also collected for the summary printed last.
"""

from __future__ import annotations

import dataclasses


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile (p99 of 100 values is the 99th smallest)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.2f} ms"


def size(n_bytes: int) -> str:
    return f"{n_bytes} B" if n_bytes < 1024 else f"{n_bytes / 1024:.0f} KB"


@dataclasses.dataclass(frozen=True)
class Verdict:
    section: str
    target: str  # "added TTFT, tiny request <= 0.5 ms"
    figure: str
    met: bool

    @property
    def word(self) -> str:
        return "met" if self.met else "MISSED"


class Report:
    def __init__(self) -> None:
        self._rows: list[tuple[str, str, str]] = []
        self.verdicts: list[Verdict] = []
        self._section = ""

    def section(self, title: str) -> None:
        self.flush()
        self._section = title.split(".", 1)[0].strip()
        print(f"\n{title}", flush=True)

    def row(self, label: str, figure: str, target: str = "") -> None:
        self._rows.append((label, figure, target))

    def note(self, text: str) -> None:
        self._rows.append(("", text, ""))

    def judge(self, label: str, figure: str, target: str, value: float, limit: float) -> bool:
        """A row whose figure is checked against a target: `value` met when <= `limit`."""
        met = value <= limit
        return self.judge_met(label, figure, target, met)

    def judge_met(self, label: str, figure: str, target: str, met: bool) -> bool:
        self.verdicts.append(Verdict(self._section, target, figure.strip(), met))
        self.row(label, figure, f"[target {target}: {'met' if met else 'MISSED'}]")
        return met

    def flush(self) -> None:
        """Print the rows gathered since the last flush, aligned."""
        measured = [(label, figure) for label, figure, _ in self._rows if label]
        label_width = max((len(label) for label, _ in measured), default=0)
        figure_width = max((len(figure) for _, figure in measured), default=0)
        for label, figure, target in self._rows:
            if not label:
                print(f"    {'':<{label_width}}  ({figure})")
            else:
                print(f"    {label:<{label_width}}  {figure:<{figure_width}}  {target}".rstrip())
        self._rows.clear()

    def print_summary(self, title: str = "Targets of issue 15 (a lean streaming path)") -> None:
        self.flush()
        if not self.verdicts:
            return
        print(f"\n{title}:")
        width = max(len(f"{verdict.section}. {verdict.target}") for verdict in self.verdicts)
        for verdict in self.verdicts:
            label = f"{verdict.section}. {verdict.target}"
            print(f"    {verdict.word:<6}  {label:<{width}}  {verdict.figure}")
        missed = sum(not verdict.met for verdict in self.verdicts)
        print(f"    {len(self.verdicts) - missed} met, {missed} MISSED")
