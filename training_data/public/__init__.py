"""The packaged copy of the public GPU kernel table (``training_data.packed_kernels``)."""
