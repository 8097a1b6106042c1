"""Write data/keywords/keywords.npz: short spoken keywords synthesised by espeak-ng (Debian package espeak-ng), every
word in several voices, speeds and pitches, as 16 kHz int16 clips of 1 s (the word centred, silence around it).
Labelled synthetic: no recorded speech. Run once where espeak-ng is installed; the tests and the benchmark read the
file it writes (espeak-ng is not needed to run them).

    python scripts/synthesise_keywords.py
"""

from __future__ import annotations

import io
import subprocess
import wave
from pathlib import Path

import numpy as np
from scipy.signal import resample_poly

WORDS = ["yes", "no", "up", "down", "left", "right"]
# (voice, words per minute, pitch 0-99): espeak-ng's English voices with its variants (+m1 ... +f3)
VOICES = [("en-us", 150, 50), ("en-gb", 175, 40), ("en-gb-scotland", 140, 60), ("en-gb-x-rp+f2", 160, 70),
          ("en-us+m3", 190, 35), ("en-gb-x-gbclan+f3", 130, 55), ("en-us+f1", 170, 80), ("en-gb-x-gbcwmd+m1", 155, 30),
          ("en-029+Andy", 165, 50), ("en-us-nyc+belinda", 150, 60), ("en-gb+caleb", 180, 40), ("en-us+linda", 140, 75),
          ("en-gb-x-rp+david", 160, 45), ("en-us+m7", 200, 45), ("en-gb+f4", 145, 65)]
RATE, SAMPLES = 16000, 16000
OUT = Path(__file__).resolve().parents[1] / "data" / "keywords" / "keywords.npz"


def speak(word: str, voice: str, speed: int, pitch: int) -> np.ndarray:
    wav = subprocess.run(["espeak-ng", "-v", voice, "-s", str(speed), "-p", str(pitch), "--stdout", word],
                         check=True, capture_output=True).stdout
    with wave.open(io.BytesIO(wav)) as f:
        rate, raw = f.getframerate(), f.readframes(f.getnframes())
    x = np.frombuffer(raw, np.int16).astype(np.float64)
    x = resample_poly(x, RATE, rate)
    loud = np.flatnonzero(np.abs(x) > 0.05 * np.max(np.abs(x)))
    x = x[loud[0]:loud[-1] + 1][:SAMPLES]  # the word without its leading and trailing silence
    clip = np.zeros(SAMPLES)
    start = (SAMPLES - len(x)) // 2
    clip[start:start + len(x)] = x
    return np.clip(np.round(clip), -32768, 32767).astype(np.int16)


def main() -> None:
    clips, labels, voices = [], [], []
    for label, word in enumerate(WORDS):
        for voice, speed, pitch in VOICES:
            clips.append(speak(word, voice, speed, pitch))
            labels.append(label)
            voices.append(f"{voice} -s {speed} -p {pitch}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT, clips=np.stack(clips), labels=np.asarray(labels, np.int8), words=np.asarray(WORDS),
                        voices=np.asarray(voices), rate=np.int32(RATE))
    print(f"{OUT}: {len(clips)} clips of {SAMPLES} samples at {RATE} Hz, {OUT.stat().st_size} bytes")


if __name__ == "__main__":
    main()
