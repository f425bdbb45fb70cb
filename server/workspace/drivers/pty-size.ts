import { AppError } from "@/server/shared/errors";

/** Bounds of a terminal size: xterm.js never asks for more, and a zero or negative size is an error. */
const PTY_MAX_COLS = 1000;
const PTY_MAX_ROWS = 500;

/** What every driver with a terminal checks before it opens one (PtyOptions.cols and rows). */
export function assertPtySize(cols: number, rows: number): void {
  const ok = (n: number, max: number) => Number.isInteger(n) && n >= 1 && n <= max;
  if (!ok(cols, PTY_MAX_COLS) || !ok(rows, PTY_MAX_ROWS)) {
    throw new AppError("BAD_REQUEST", `terminal size ${cols}x${rows}`, {
      userMessage: `A terminal is 1–${PTY_MAX_COLS} columns by 1–${PTY_MAX_ROWS} rows.`,
    });
  }
}
