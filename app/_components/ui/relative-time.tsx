"use client";

import { useEffect, useState } from "react";
import { Tooltip } from "./tooltip";

const UNITS: [Intl.RelativeTimeFormatUnit, number][] = [
  ["year", 365 * 24 * 3600],
  ["month", 30 * 24 * 3600],
  ["week", 7 * 24 * 3600],
  ["day", 24 * 3600],
  ["hour", 3600],
  ["minute", 60],
  ["second", 1],
];
const relativeFormat = new Intl.RelativeTimeFormat("en", { numeric: "auto" });

/** "3 minutes ago" for `date` seen at `now`. */
function formatRelative(date: Date, now: number): string {
  const seconds = Math.round((date.getTime() - now) / 1000);
  if (Math.abs(seconds) < 10) return "just now";
  for (const [unit, size] of UNITS) {
    if (Math.abs(seconds) >= size || unit === "second") {
      return relativeFormat.format(Math.round(seconds / size), unit);
    }
  }
  return date.toLocaleString();
}

/**
 * A time as "5 minutes ago", the exact time (ISO, UTC) on hover and in the `<time>` element. The relative
 * text is computed after mount, so server and browser render the same first HTML (no hydration mismatch).
 */
export function RelativeTime({
  value,
  fallback = "—",
}: {
  value: Date | string | null | undefined;
  fallback?: string;
}) {
  const [now, setNow] = useState<number | null>(null);
  useEffect(() => {
    setNow(Date.now());
    const timer = setInterval(() => setNow(Date.now()), 30_000);
    return () => clearInterval(timer);
  }, []);
  if (value == null) return <span className="text-muted-foreground">{fallback}</span>;
  const date = typeof value === "string" ? new Date(value) : value;
  const exact = date
    .toISOString()
    .replace("T", " ")
    .replace(/\.\d+Z$/, " UTC");
  return (
    <Tooltip content={exact}>
      <time dateTime={date.toISOString()} title={exact} className="whitespace-nowrap tabular-nums">
        {now === null ? exact : formatRelative(date, now)}
      </time>
    </Tooltip>
  );
}
