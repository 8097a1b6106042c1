"""Flash of a front end's stream build with a frame stack, in a firmware whose main calls ``<name>_predict``,
``<name>_feed`` or both (text + data of the linked image, --gc-sections as the chips' builds link): the frame stack's
two parts are compiled beside ``<name>_predict``, their constants equal to its own #defines of them (stored once).
Also prints the build report's fit flash (its measurement harness calls ``<name>_predict`` only).

    python benchmarks/frame_stack_flash.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sklearn.naive_bayes import GaussianNB  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402

import tinycc_ml  # noqa: E402
from tests.features.front_end_data import motions  # noqa: E402
from tests.features.test_front_end_frame_stack import _pipeline  # noqa: E402
from tinycc_ml.features import Framer, Log, PowerSpectrum, Window  # noqa: E402

X, y = motions(150)  # the small chips' test case: 16-sample frames every 8
X = X[:, ::3]
axis = make_pipeline(Framer(16, 8), Window(16), PowerSpectrum(16), Log(floor=1e-3), GaussianNB()).fit(X, y)
mfcc, Xa = _pipeline(with_std=False)
TOOLS = {"avr": (["avr-gcc", "-mmcu=atmega328p", "-Os"], "avr-size"),
         "cortex-m4": (["arm-none-eabi-gcc", "-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16",
                        "-Os", "--specs=nosys.specs"], "arm-none-eabi-size")}
CALLS = {"predict": "r += m_predict(x);", "feed": "r += m_feed(x, M_INPUT_DIM, d);",
         "both": "r += m_predict(x); r += m_feed(x, M_INPUT_DIM, d);"}
for target, precision, pipe, cal, hop in [("avr", "int16", axis, X, 8), ("cortex-m4", "int16", mfcc, Xa[::3], 128),
                                          ("cortex-m4", "float", _pipeline(with_std=True)[0], None, 128)]:
    options = {"calibration": cal} if cal is not None else {}
    r = tinycc_ml.compile(pipe, target=target, precision=precision, stream_hop=hop, name="m", **options)
    t = "float" if precision == "float" else "int16_t"
    sizes = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in r.files.items():
            (Path(tmp) / name).write_text(text)
        for call, line in CALLS.items():
            (Path(tmp) / "main.c").write_text(f'#include "m.h"\nvolatile {t} x[M_INPUT_DIM]; int d[64];\n'
                                              f'int main(void) {{ int r = 0; {line.replace("(x", f"(({t} *)x")} '
                                              'return r; }\n')
            cc, size = TOOLS[target]
            subprocess.run(cc + ["-ffunction-sections", "-fdata-sections", "-Wl,--gc-sections", "-o",
                                 f"{tmp}/f.elf", f"{tmp}/main.c", f"{tmp}/m.c", "-lm"], check=True)
            text, data = subprocess.run([size, f"{tmp}/f.elf"], capture_output=True, text=True,
                                        check=True).stdout.split("\n")[1].split()[:2]
            sizes.append(f"{call} {int(text) + int(data):,} B")
    print(f"{target} {precision} ({r.report['stream']['frame_stack'][:30]}): report flash "
          f"{r.report['fit']['flash_bytes']:,} B; linked: " + ", ".join(sizes))
