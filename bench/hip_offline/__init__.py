"""HIP offer and ISA audits on clang's output, no device."""
