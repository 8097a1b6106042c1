"""TFLite Micro's signal library (``signal/`` in tensorflow/tflite-micro): the audio front end's ops, one module
per op, read from ``.tflite`` files as the custom operators they are (``frontends.tflite_custom``). Each module
holds the op's integer semantics in numpy (the same widths, rounding and wrap-around as ``signal/src``), its
portable C and its lowering; state across calls (noise estimates, ring buffers) is the IR's ``state``; kissfft.py
holds the arithmetic the two real FFTs share. Importing this package
registers them."""

from tinycc_ml.ir.ops.signal import (  # noqa: F401  (register)
    delay,
    energy,
    fft_auto_scale,
    filter_bank,
    filter_bank_log,
    filter_bank_square_root,
    framer,
    irfft,
    overlap_add,
    pcan,
    rfft,
    spectral_subtraction,
    stacker,
    window,
)
