import { z } from "zod";
import { parseEnv, readProcessEnv, type RawEnv } from "./env";

const ZSecretsEnv = z.object({
  // Signs session cookies (better-auth). `npm start` generates one into .data/secrets.json when unset.
  BERTH_AUTH_SECRET: z
    .string({ error: "required (npm start generates one)" })
    .min(32, "at least 32 characters"),
  // 32 bytes, base64 or hex: encrypts stored credentials such as model API keys.
  BERTH_ENCRYPTION_KEY: z
    .string({ error: "required (npm start generates one)" })
    .refine((value) => decodeKey(value)?.length === 32, "must be 32 bytes, base64- or hex-encoded"),
});

export type SecretsConfig = { readonly authSecret: string; readonly encryptionKey: Buffer };

function decodeKey(value: string): Buffer | undefined {
  if (/^[0-9a-fA-F]{64}$/.test(value)) return Buffer.from(value, "hex");
  if (/^[A-Za-z0-9+/_-]+={0,2}$/.test(value)) return Buffer.from(value, "base64");
  return undefined;
}

export function loadSecretsConfig(env: RawEnv = readProcessEnv()): SecretsConfig {
  const parsed = parseEnv(ZSecretsEnv, env, "secrets");
  // The refine above guarantees a 32-byte key.
  return { authSecret: parsed.BERTH_AUTH_SECRET, encryptionKey: decodeKey(parsed.BERTH_ENCRYPTION_KEY)! };
}
