"""The accelerator's figures and the number formats a job computes and stores in: inputs both kinds read."""

from botec.graph import Formulas

formulas = Formulas(account="memory")

formulas.input("peak_flops_per_s", unit="FLOP/s", account="compute",
               meaning="theoretical dense peak of one accelerator at the compute precision")
formulas.input("device_memory_bytes", unit="B", meaning="memory of one accelerator")
formulas.input("memory_bandwidth_bytes_per_s", unit="B/s", account="serving",
               meaning="memory bandwidth of one accelerator (HBM/GDDR)")
formulas.input("weight_bytes_per_parameter", unit="B/parameter", meaning="bytes of the working weights per parameter")
formulas.input("activation_bytes_per_element", unit="B", meaning="bytes per activation element (b; 2 for BF16)")
# The host side of an accelerator (offloading, asynchronous checkpoints): declared once here, for every account.
formulas.input("host_link_bytes_per_s", unit="B/s",
               meaning="host-to-accelerator bandwidth per accelerator per direction (PCIe or the host link)")
formulas.input("host_memory_bytes", unit="B", meaning="host (CPU) memory of one node")
