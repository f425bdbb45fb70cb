import { z } from "zod";
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
});

export type HttpConfig = {
  readonly port: number;
  readonly host: string;
  readonly baseUrl: string;
  readonly trustedProxies: readonly string[];
  readonly terminalReattachGraceMs: number;
};

export function loadHttpConfig(env: RawEnv = readProcessEnv()): HttpConfig {
  const parsed = parseEnv(ZHttpEnv, env, "http");
  const baseUrl = parsed.BERTH_BASE_URL ?? `http://localhost:${parsed.PORT}`;
  return {
    port: parsed.PORT,
    host: parsed.HOST,
    baseUrl: baseUrl.replace(/\/+$/, ""),
    trustedProxies: parsed.BERTH_TRUSTED_PROXIES,
    terminalReattachGraceMs: parsed.BERTH_TERMINAL_REATTACH_GRACE_MS,
  };
}
