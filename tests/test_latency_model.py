"""The latency model: decayed quantiles, canvas-granular vs per-token prediction, priors, state."""

from __future__ import annotations

import json
import random

import pytest

from policies.latency import DecayedHistogram, LatencyModel, Prior, answer_tokens

pytestmark = pytest.mark.unit


def test_histogram_quantiles_within_bin_resolution():
    hist = DecayedHistogram(half_life=10_000)  # effectively no decay
    values = [i / 100 for i in range(1, 1001)]  # 0.01 .. 10.0 s, uniform
    random.Random(1).shuffle(values)
    for v in values:
        hist.add(v)
    assert hist.quantile(0.5) == pytest.approx(5.0, rel=0.1)
    assert hist.quantile(0.95) == pytest.approx(9.5, rel=0.1)
    assert hist.mean() == pytest.approx(5.005, rel=0.01)
    assert DecayedHistogram().quantile(0.5) is None


def test_quantiles_follow_drift_within_tens_of_samples():
    hist = DecayedHistogram(half_life=20)
    for _ in range(200):
        hist.add(1.0)
    for _ in range(30):
        hist.add(3.0)
    # 30 new samples outweigh 200 old ones: 1 - 0.5**(30/20) = 65% of the mass is new.
    assert hist.quantile(0.5) == pytest.approx(3.0, rel=0.1)
    assert hist.weight < 30  # saturates at 1/(1-keep) ~ 29


def test_diffusion_time_is_per_canvas_not_per_token():
    model = LatencyModel("diffusion", canvas_length=256, prior=Prior(ttft_s=0.05, canvas_s=0.25))
    one_word, full_canvas, two_canvases = (model.predict(n) for n in (20, 256, 257))
    assert one_word.p50_s == pytest.approx(full_canvas.p50_s)  # 20 tokens cost a whole canvas
    assert one_word.p50_s == pytest.approx(0.30)  # overhead + one canvas
    assert two_canvases.p50_s == pytest.approx(0.55)  # plus exactly one more canvas


def test_autoregressive_time_grows_per_token():
    model = LatencyModel("autoregressive", prior=Prior(ttft_s=0.8, tokens_per_s=50))
    short, long = model.predict(20), model.predict(256)
    assert short.p50_s == pytest.approx(0.8 + 19 / 50)
    assert long.p50_s == pytest.approx(0.8 + 255 / 50)
    assert long.p95_s > long.p50_s  # priors carry an honest spread


def test_measurements_replace_priors_as_samples_arrive():
    model = LatencyModel("autoregressive", prior=Prior(ttft_s=2.0, tokens_per_s=10), prior_weight=3)
    for _ in range(100):  # really: 0.2 s to first token, 100 tok/s
        model.observe(0.2 + 99 / 100, first_s=0.2, output_tokens=100)
    prediction = model.predict(100)
    assert prediction.first_p50_s == pytest.approx(0.2, rel=0.12)
    assert prediction.p50_s == pytest.approx(1.19, rel=0.12)
    assert prediction.samples == 100  # one per measured call


def test_total_only_samples_split_in_proportion_and_track_a_slowdown():
    model = LatencyModel("autoregressive", prior=Prior(ttft_s=0.5, tokens_per_s=100))
    before = model.predict(100).p50_s
    for _ in range(60):  # non-streamed calls twice as slow as the prior says
        model.observe(2 * before, output_tokens=100)
    after = model.predict(100)
    assert after.p50_s == pytest.approx(2 * before, rel=0.15)
    assert after.first_p50_s > 0.5 * 1.5  # both parts moved


def test_diffusion_learns_canvas_time_from_streamed_calls():
    model = LatencyModel("diffusion", canvas_length=256, prior=Prior(canvas_s=1.0))
    for _ in range(80):  # 3 canvases: first after 0.1 s, then 0.05 s each
        model.observe(0.2, first_s=0.1, output_tokens=600, canvases=3)
    assert model.predict(768).p50_s == pytest.approx(0.2, rel=0.12)
    assert model.predict(10).p50_s == pytest.approx(0.1, rel=0.12)


def test_answer_length_learned_from_uncut_answers_and_capped_by_max_tokens():
    model = LatencyModel("autoregressive")
    for _ in range(50):
        model.observe(1.0, output_tokens=140)
        model.observe(1.0, output_tokens=16, truncated=True)  # cut by max_tokens: not a natural length
    assert model.predict().output_tokens == pytest.approx(140, rel=0.1)
    assert model.predict(max_tokens=64).output_tokens == 64
    assert answer_tokens(None, None) == (200, 500)
    assert answer_tokens(30, None) == (30, 30)


def test_failures_and_censored_calls_raise_the_tail():
    model = LatencyModel("autoregressive", prior=Prior(ttft_s=0.2, tokens_per_s=100))
    for _ in range(20):
        model.observe(0.5, first_s=0.2, output_tokens=31)
    healthy = model.predict(31)
    for _ in range(10):
        model.observe_failure()
    assert model.failure_rate() > 0.2
    assert model.predict(31).p95_s > healthy.p95_s
    for _ in range(10):
        model.observe_censored(5.0)  # abandoned after 5 s with nothing yet
    assert model.predict(31).first_p95_s > 4.0


def test_state_round_trips_through_json():
    model = LatencyModel("diffusion", prior=Prior(canvas_s=0.25))
    for i in range(30):
        model.observe(0.3 + i / 100, first_s=0.2, output_tokens=400, canvases=2, now=1000.0 + i)
    restored = LatencyModel("diffusion", prior=Prior(canvas_s=0.25))
    assert restored.load_dict(json.loads(json.dumps(model.to_dict())))
    assert restored.predict(300) == model.predict(300)
    assert restored.last_ts == 1029.0
    # State from another kind of backend is refused rather than misread.
    assert not LatencyModel("autoregressive").load_dict(model.to_dict())
    assert not LatencyModel("diffusion").load_dict({**model.to_dict(), "v": 99})


def test_merge_replays_fresh_samples_as_if_added_in_order():
    rng = random.Random(3)
    shared, fresh = LatencyModel(), LatencyModel()
    sequential = LatencyModel()
    for _ in range(40):
        t = rng.uniform(0.5, 1.0)
        shared.observe(t, first_s=t / 4, output_tokens=50)
        sequential.observe(t, first_s=t / 4, output_tokens=50)
    for _ in range(25):
        t = rng.uniform(2.0, 3.0)
        fresh.observe(t, first_s=t / 4, output_tokens=50)
        sequential.observe(t, first_s=t / 4, output_tokens=50)
    merged = shared.merged(fresh)
    assert merged.predict(50).p50_s == pytest.approx(sequential.predict(50).p50_s, rel=1e-6)
    assert merged.first.count == 65


def test_without_a_prior_nothing_is_assumed_and_any_deadline_is_possible():
    model = LatencyModel("autoregressive")  # no `latency:` in config
    untried = model.predict(100)
    assert not untried.known and untried.samples == 0
    assert untried.optimistic_s == 0.0  # worth trying against any deadline
    with_prior = LatencyModel("autoregressive", prior=Prior(ttft_s=0.5, tokens_per_s=100)).predict(100)
    assert with_prior.known and with_prior.optimistic_s == pytest.approx(with_prior.p50_s)


def test_one_sample_is_not_trusted_like_thirty():
    one, many = LatencyModel(), LatencyModel()
    one.observe(1.0, first_s=0.2, output_tokens=81)
    for _ in range(200):
        many.observe(1.0, first_s=0.2, output_tokens=81)
    a, b = one.predict(81), many.predict(81)
    assert a.p50_s == pytest.approx(b.p50_s, rel=0.01)  # same centre...
    assert a.p95_s == pytest.approx(1.5 * b.p95_s / (1 + 0.5 / many.evidence() ** 0.5), rel=0.02)  # ...wider
    assert a.optimistic_s < b.optimistic_s < b.p95_s < a.p95_s
    assert one.spread() == pytest.approx(1.5)
    assert many.spread() < 1.1  # a saturated history is widened by less than a tenth
    assert a.known and a.samples == 1


def test_a_censored_first_call_without_a_prior_is_learned_from_its_own_time():
    model = LatencyModel()
    model.observe_censored(0.3)  # lost a hedge race 0.3 s in, before its first token
    # Later than that, by an unknown amount: taken as late again; not the generic 1 s guess.
    assert model.predict(1).first_p50_s == pytest.approx(0.6, rel=0.1)


def test_a_call_cut_mid_answer_teaches_first_token_and_a_slower_decode():
    model = LatencyModel(prior=Prior(ttft_s=0.1, tokens_per_s=1000))
    for _ in range(30):
        model.observe(0.1 + 99 / 1000, first_s=0.1, output_tokens=100)
    before = model.predict(100).p50_s
    for _ in range(30):  # it slowed down: first token on time, then the deadline cut it at 1 s
        model.observe_cut(1.0, 0.1)
    assert model.predict(100).first_p50_s == pytest.approx(0.1, rel=0.1)
    assert model.predict(100).p50_s > 4 * before


def test_an_outage_that_ended_does_not_linger_as_a_failure_rate():
    model = LatencyModel(prior=Prior(ttft_s=0.1, tokens_per_s=1000))
    for _ in range(20):
        model.observe(0.2, first_s=0.1, output_tokens=100)
    healthy = model.predict(100).p95_s
    for _ in range(8):  # down for a while
        model.observe_failure()
    assert model.failure_rate() > 0.2
    model.observe(0.2, first_s=0.1, output_tokens=100)  # back
    assert model.failure_rate() == 0.0 and model.predict(100).p95_s <= healthy * 1.01
    for outcome in [1, 0, 0, 1, 0, 1, 1, 0]:  # intermittent failures are kept
        model.observe_failure() if outcome else model.observe(0.2, first_s=0.1, output_tokens=100)
    assert model.failure_rate() > 0.2
