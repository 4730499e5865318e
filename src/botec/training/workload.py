"""What the job is: the quantities the workload section of a contract states.

These are fixed when an estimate is compared with a measurement (lesson 000: "keep the
workload definition fixed while comparing estimate with measurement; otherwise, a faster
result might simply reflect less work").
"""

from botec.quantities import declare_input

declare_input("parameters", account="workload", unit="parameters",
              meaning="model parameters (P)")
declare_input("tokens", account="workload", unit="tokens",
              meaning="training tokens processed across the run (D)")
declare_input("sequence_length", account="workload", unit="tokens",
              meaning="tokens per sequence (S)")
declare_input("layers", account="workload", unit="layers",
              meaning="transformer layers (L)")
declare_input("hidden_size", account="workload", unit="1",
              meaning="hidden width of the model (H)")
declare_input("token_bytes", account="workload", unit="B",
              meaning="bytes per stored token id in the prepared dataset")
