"""Learning's figures for `/metrics`, read from the learner at scrape time.

    route_learn_version                     the weights version in use (0: the configured ones)
    route_learn_shadow_total{outcome}       shadow judgements: judged | no-verdict | failed |
                                            skipped-budget | skipped-busy | skipped-unavailable
    route_learn_shadow_spend_usd_total      dollars this process's shadow judging spent
    route_learn_shadow_spend_today_usd      dollars spent today (UTC) by every process of the store
    route_learn_shadow_budget_usd           routing.learn.budget_usd_per_day
    route_learn_refits_total{result}        refits: adopted | kept | waiting (for `route learn adopt`)

Under `route serve --workers N` these come from the worker answering the scrape (as breaker
states do); today's spend is the store's, so it covers every worker and replica.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

if TYPE_CHECKING:
    from router.learning.learner import Learner

__all__ = ["LearningCollector"]

_OUTCOMES = ("judged", "no-verdict", "failed", "skipped-budget", "skipped-busy", "skipped-unavailable")


class LearningCollector:
    def __init__(self, learner: Learner):
        self._learner = learner

    def collect(self) -> Iterator[Metric]:
        learner = self._learner
        counts = learner.counts
        version = GaugeMetricFamily("route_learn_version", "Learned weights version in use (0: the configured ones)")
        version.add_metric([], learner.version)
        shadow = CounterMetricFamily("route_learn_shadow", "Shadow judgements by outcome", labels=["outcome"])
        for outcome in _OUTCOMES:
            shadow.add_metric([outcome], counts.shadow.get(outcome, 0))
        spent = CounterMetricFamily("route_learn_shadow_spend_usd", "Dollars this process's shadow judging spent")
        spent.add_metric([], counts.spent_usd)
        today = GaugeMetricFamily("route_learn_shadow_spend_today_usd", "Dollars shadow judging spent today (UTC), "
                                  "every process of the learning store")
        today.add_metric([], learner.spent_today())
        budget = GaugeMetricFamily("route_learn_shadow_budget_usd", "Most shadow judging may spend per UTC day")
        budget.add_metric([], learner.settings.budget_usd_per_day)
        refits = CounterMetricFamily("route_learn_refits", "Refits of the learned weights", labels=["result"])
        for result in ("adopted", "kept", "waiting"):
            refits.add_metric([result], counts.refits.get(result, 0))
        yield from (version, shadow, spent, today, budget, refits)
