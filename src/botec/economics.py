"""Cost and unit economics of a training run: money, energy, cost per million tokens.

Energy counts the accelerators at their rated power (TDP) scaled by the facility's PUE; hosts,
network and storage draw more, so it is a lower bound on the facility's energy.
"""

from botec.quantities import declare_input, formula

declare_input("price_per_accelerator_hour", account="cost", unit="USD/h",
              meaning="price of one accelerator for one hour")
declare_input("accelerator_power_watts", account="cost", unit="W",
              meaning="power drawn by one accelerator (its TDP unless measured)")
declare_input("pue", account="cost", unit="1",
              meaning="power usage effectiveness of the facility (total / IT power)")


@formula(account="cost", unit="USD", meaning="money for the accelerator-hours of the run",
         expression="accelerator_hours × price_per_accelerator_hour")
def training_cost_usd(accelerator_hours, price_per_accelerator_hour):
    """Cost = accelerator-hours × price per accelerator-hour."""
    return accelerator_hours * price_per_accelerator_hour


@formula(account="cost", unit="USD", meaning="training cost per million tokens processed",
         expression="training_cost_usd / tokens × 1,000,000")
def cost_per_million_tokens_usd(training_cost_usd, tokens):
    return training_cost_usd / tokens * 1e6


@formula(account="cost", unit="J", meaning="accelerator energy of the run, facility overhead included",
         expression="accelerators × run_seconds × accelerator_power_watts × pue")
def energy_joules(accelerators, run_seconds, accelerator_power_watts, pue):
    """E = N × T × P_accelerator × PUE (accelerators only; hosts and fabric draw more)."""
    return accelerators * run_seconds * accelerator_power_watts * pue
