"""The environment: fingerprint, NVML, measured ceilings and doctor."""
