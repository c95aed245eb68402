"""Calibrators shipped with the package: live model servers behind an OpenAI-compatible API.

A calibrator is what a calibration factory returns (`tasks/calibration.py`); the executor calls
it with public tasks only and grades the answers itself. `openai.live_responses` asks a served
model; `record.Recorder` keeps its answers as report files that `recorded_responses` replays.
"""
