import { z } from "zod";
import { AppError } from "@/server/shared/errors";
import { parseEnv, readProcessEnv, type RawEnv } from "./env";

const ZHttpEnv = z.object({
  PORT: z.coerce.number().int().min(0).max(65_535).default(3000),
  // Loopback by default: exposing the dashboard to the network is a decision, not an accident.
  HOST: z.string().default("127.0.0.1"),
  // The URL users and cookies see (behind a proxy it differs from HOST:PORT).
  BERTH_BASE_URL: z.url().optional(),
  // Reverse proxies whose X-Forwarded-For is believed (IPs or CIDRs, comma-separated). Default: none, so the
  // socket's peer is the client address used by the sign-in throttle and the audit log.
  BERTH_TRUSTED_PROXIES: z
    .string()
    .default("")
    .transform((value) =>
      value
        .split(",")
        .map((entry) => entry.trim())
        .filter((entry) => entry.length > 0),
    )
    .pipe(z.array(z.union([z.ipv4(), z.ipv6(), z.cidrv4(), z.cidrv6()]))),
  // How long a browser terminal outlives a dropped connection (a reload, a network blip) before its shell
  // ends and its workspace lease goes: the bound on how long a dead connection holds the workspace.
  BERTH_TERMINAL_REATTACH_GRACE_MS: z.coerce.number().int().min(1_000).max(3_600_000).default(30_000),
  // Preview URLs (ARCHITECTURE.md "Preview URLs") are served on an origin of their own, never the
  // dashboard's: a second listener on this port (same HOST). Unset: previews are off.
  BERTH_PREVIEW_PORT: z.coerce.number().int().min(1).max(65_535).optional(),
  // The preview origin users see (behind a proxy); default: the base URL's scheme and host on
  // BERTH_PREVIEW_PORT. Must differ from the base URL's origin.
  BERTH_PREVIEW_URL: z.url().optional(),
});

export type HttpConfig = {
  readonly port: number;
  readonly host: string;
  readonly baseUrl: string;
  readonly trustedProxies: readonly string[];
  readonly terminalReattachGraceMs: number;
  /** Where previews are served (their own origin), or null when they are off. */
  readonly preview: { readonly port: number; readonly url: string } | null;
};

export function loadHttpConfig(env: RawEnv = readProcessEnv()): HttpConfig {
  const parsed = parseEnv(ZHttpEnv, env, "http");
  const baseUrl = parsed.BERTH_BASE_URL ?? `http://localhost:${parsed.PORT}`;
  return {
    preview: previewOrigin(baseUrl, parsed.BERTH_PREVIEW_PORT, parsed.BERTH_PREVIEW_URL),
    port: parsed.PORT,
    host: parsed.HOST,
    baseUrl: baseUrl.replace(/\/+$/, ""),
    trustedProxies: parsed.BERTH_TRUSTED_PROXIES,
    terminalReattachGraceMs: parsed.BERTH_TERMINAL_REATTACH_GRACE_MS,
  };
}

/**
 * The preview origin. An app in a workspace runs whatever scripts it serves; on the dashboard's origin they
 * could call Berth's API with the visiting member's session, so the same origin is refused outright.
 */
function previewOrigin(
  baseUrl: string,
  port: number | undefined,
  url: string | undefined,
): HttpConfig["preview"] {
  if (port === undefined) {
    if (url !== undefined)
      throw new AppError(
        "INTERNAL",
        "Invalid http configuration: BERTH_PREVIEW_URL needs BERTH_PREVIEW_PORT",
      );
    return null;
  }
  const base = new URL(baseUrl);
  const origin = url ? new URL(url).origin : `${base.protocol}//${base.hostname}:${port}`;
  if (origin === base.origin) {
    throw new AppError(
      "INTERNAL",
      `Invalid http configuration: the preview origin ${origin} must differ from the dashboard's`,
    );
  }
  return { port, url: origin };
}
