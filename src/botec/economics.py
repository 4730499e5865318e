"""Cost and unit economics: money, energy, cost per million tokens, for training runs and serving fleets.

Three collections of formulas: the facility's inputs both kinds share (``facility``: price, power,
PUE), a training run's cost and energy (``training``), and a serving fleet's token math
(``serving``). Energy counts each accelerator's share of its node: its rated power (TDP) and
what the rest of the node draws (a node preset's system power, or stated), at the average draw
over the rated power, times the facility's PUE.
"""

from botec.graph import Formulas

SECONDS_PER_DAY = 86_400
TOKENS_PER_MILLION = 1_000_000

facility = Formulas(account="cost")
training = Formulas(account="cost")
serving = Formulas(account="cost")

facility.input("price_per_accelerator_hour", unit="USD/h", meaning="price of one accelerator for one hour")
facility.input("accelerator_power_watts", unit="W", meaning="rated power of one accelerator (its TDP unless measured)")
facility.input("host_power_per_accelerator_watts", unit="W",
               meaning="what the rest of its node draws per accelerator: CPUs, memory, NICs, fans (rated)")
facility.input("average_power_fraction", unit="1", meaning="average draw over the rated power while the job runs")
facility.input("pue", unit="1", meaning="power usage effectiveness of the facility (total / IT power)")


@facility.formula(unit="W", meaning="facility power per accelerator: its node's share, at the average draw, × PUE",
                  expression="(accelerator_power_watts + host_power_per_accelerator_watts) × average_power_fraction"
                             " × pue", detail=True,
                  source="a node draws more than its accelerators (DGX H100: 10.2 kW max for 8 × 700 W GPUs) and, "
                         "on average, less than its maximum (6.5-8.5 kW under load)")
def facility_watts_per_accelerator(accelerator_power_watts, host_power_per_accelerator_watts, average_power_fraction,
                                   pue):
    """(P_accelerator + P_host) × average fraction × PUE: what one accelerator costs the facility in power."""
    return (accelerator_power_watts + host_power_per_accelerator_watts) * average_power_fraction * pue


# --- a training run ------------------------------------------------------------------------------

@training.formula(unit="USD", meaning="money for the accelerator-hours of the run",
                  expression="accelerator_hours × price_per_accelerator_hour")
def training_cost_usd(accelerator_hours, price_per_accelerator_hour):
    """Cost = accelerator-hours × price per accelerator-hour."""
    return accelerator_hours * price_per_accelerator_hour


@training.formula(unit="USD", meaning="expected money for the run, failures and restarts counted",
                  expression="expected_accelerator_hours × price_per_accelerator_hour")
def expected_training_cost_usd(expected_accelerator_hours, price_per_accelerator_hour):
    """The expected accelerator-hours (see :mod:`botec.training.goodput`) at the same price."""
    return training_cost_usd(expected_accelerator_hours, price_per_accelerator_hour)


@training.formula(unit="USD", meaning="money the optimal checkpoint interval would save over the stated one",
                  expression="optimal_interval_saving_accelerator_hours × price_per_accelerator_hour")
def optimal_interval_saving_usd(optimal_interval_saving_accelerator_hours, price_per_accelerator_hour):
    return training_cost_usd(optimal_interval_saving_accelerator_hours, price_per_accelerator_hour)


@training.formula(unit="USD", meaning="training cost per million tokens processed",
                  expression="training_cost_usd / tokens × 1,000,000")
def cost_per_million_tokens_usd(training_cost_usd, tokens):
    return training_cost_usd / tokens * TOKENS_PER_MILLION


@training.formula(unit="J", meaning="accelerator energy of the run, facility overhead included",
                  expression="accelerators × facility_watts_per_accelerator × run_seconds")
def energy_joules(accelerators, facility_watts_per_accelerator, run_seconds):
    """E = N × P_facility × T, P_facility the node's share per accelerator at its average draw, × PUE."""
    return accelerators * facility_watts_per_accelerator * run_seconds


# --- a serving fleet: token math and unit economics ----------------------------------------------

serving.input("api_price_per_million_input_tokens", unit="USD",
              meaning="an API's price per million prompt tokens, for comparison")
serving.input("api_price_per_million_output_tokens", unit="USD",
              meaning="an API's price per million generated tokens, for comparison")


@serving.formula(unit="requests", meaning="requests served per day", expression="requests_per_s × 86,400")
def requests_per_day(requests_per_s):
    return requests_per_s * SECONDS_PER_DAY


@serving.formula(unit="accelerator-hours", meaning="accelerator-hours the fleet occupies per day",
                 expression="serving_accelerators × 24")
def serving_accelerator_hours_per_day(serving_accelerators):
    return serving_accelerators * 24


@serving.formula(unit="USD", meaning="money per day for the serving fleet",
                 expression="serving_accelerator_hours_per_day × price_per_accelerator_hour")
def serving_cost_per_day_usd(serving_accelerator_hours_per_day, price_per_accelerator_hour):
    return serving_accelerator_hours_per_day * price_per_accelerator_hour


@serving.formula(unit="USD", meaning="cost per request", expression="serving_cost_per_day_usd / requests_per_day")
def cost_per_request_usd(serving_cost_per_day_usd, requests_per_day):
    return serving_cost_per_day_usd / requests_per_day


@serving.formula(unit="USD", meaning="cost per million prompt tokens (the prefill share of the fleet's time)",
                 expression="serving_cost_per_day_usd × prefill_time_share / (requests_per_day × prompt_tokens)"
                            " × 1,000,000")
def cost_per_million_input_tokens_usd(serving_cost_per_day_usd, prefill_time_share, requests_per_day, prompt_tokens):
    return serving_cost_per_day_usd * prefill_time_share / (requests_per_day * prompt_tokens) * TOKENS_PER_MILLION


@serving.formula(unit="USD", meaning="cost per million generated tokens (the decode share of the fleet's time)",
                 expression="serving_cost_per_day_usd × (1 − prefill_time_share) / (requests_per_day × output_tokens)"
                            " × 1,000,000")
def cost_per_million_output_tokens_usd(serving_cost_per_day_usd, prefill_time_share, requests_per_day,
                                       output_tokens):
    return (serving_cost_per_day_usd * (1 - prefill_time_share) / (requests_per_day * output_tokens)
            * TOKENS_PER_MILLION)


@serving.formula(unit="J", meaning="accelerator energy per token served (prompt and output), PUE included",
                 expression="serving_accelerators × facility_watts_per_accelerator × 86,400"
                            " / (requests_per_day × (prompt_tokens + output_tokens))")
def energy_per_token_joules(serving_accelerators, facility_watts_per_accelerator, requests_per_day, prompt_tokens,
                            output_tokens):
    """The fleet draws its rated power all day, busy or not: an upper bound per token."""
    return (serving_accelerators * facility_watts_per_accelerator * SECONDS_PER_DAY
            / (requests_per_day * (prompt_tokens + output_tokens)))


@serving.formula(unit="USD", meaning="what one request costs through the API",
                 expression="(prompt_tokens × api_price_per_million_input_tokens + output_tokens"
                            " × api_price_per_million_output_tokens) / 1,000,000")
def api_cost_per_request_usd(prompt_tokens, api_price_per_million_input_tokens, output_tokens,
                             api_price_per_million_output_tokens):
    return (prompt_tokens * api_price_per_million_input_tokens
            + output_tokens * api_price_per_million_output_tokens) / TOKENS_PER_MILLION


@serving.formula(unit="USD", meaning="what the traffic costs per day through the API",
                 expression="api_cost_per_request_usd × requests_per_day")
def api_cost_per_day_usd(api_cost_per_request_usd, requests_per_day):
    return api_cost_per_request_usd * requests_per_day


@serving.formula(unit="requests/s", meaning="traffic at which one always-on replica costs as much as the API",
                 expression="replica_accelerators × price_per_accelerator_hour / 3,600 / api_cost_per_request_usd")
def break_even_requests_per_s(replica_accelerators, price_per_accelerator_hour, api_cost_per_request_usd):
    """Below it the API is cheaper; above it (up to a replica's capacity) self-hosting is."""
    return replica_accelerators * price_per_accelerator_hour / 3600 / api_cost_per_request_usd
