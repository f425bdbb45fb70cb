import { AppError, isAppError } from "@/server/shared/errors";
import { createMcpAddressGuard } from "@/server/workspace/mcp/mcp-network-policy";

/**
 * Where a webhook may be delivered: https on a public address, checked when the endpoint is registered and
 * again at every connection (the MCP network policy's guarded fetch resolves the name and refuses private,
 * loopback, link-local and metadata addresses, so a name re-pointed at 127.0.0.1 later is refused too).
 * The one exception is an origin the OPERATOR listed exactly (BERTH_WEBHOOK_ALLOWED_ORIGINS, scheme + host +
 * port): its own receivers, which may be plain http or private. There is no switch that turns the rule off.
 */
export type WebhookUrlPolicy = { readonly allowedOrigins: readonly string[] };

type CheckedUrl = { url: URL; operatorAllowed: boolean };

function checkWebhookUrl(raw: string, policy: WebhookUrlPolicy): CheckedUrl {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw invalid(`"${raw.slice(0, 200)}" is not a URL.`);
  }
  if (url.username || url.password) throw invalid("The URL must not contain credentials.");
  if (url.protocol !== "https:" && url.protocol !== "http:") throw invalid("The URL must be https.");
  const operatorAllowed = policy.allowedOrigins.includes(url.origin);
  if (!operatorAllowed && url.protocol !== "https:") throw invalid("The URL must be https.");
  return { url, operatorAllowed };
}

function guardFor(checked: CheckedUrl) {
  return createMcpAddressGuard(
    { allowedHosts: checked.operatorAllowed ? [checked.url.hostname] : [] },
    { subject: "The webhook URL" },
  );
}

/** Registration-time check: the scheme rule, then every address the host resolves to. */
export async function assertWebhookUrlAllowed(raw: string, policy: WebhookUrlPolicy): Promise<void> {
  const checked = checkWebhookUrl(raw, policy);
  await guardFor(checked)
    .assertUrlAllowed(checked.url.href)
    .catch((error: unknown) => {
      throw toWebhookRefusal(error, checked.url);
    });
}

/** A fetch that connects only where the policy allows (checked at connect time, every attempt). */
export function webhookFetch(raw: string, policy: WebhookUrlPolicy, init: RequestInit): Promise<Response> {
  const checked = checkWebhookUrl(raw, policy);
  return guardFor(checked)
    .fetch(checked.url, init)
    .catch((error: unknown) => {
      throw toWebhookRefusal(error, checked.url);
    });
}

function toWebhookRefusal(error: unknown, url: URL): unknown {
  if (!isAppError(error) || error.details?.reason !== "mcp_host_not_allowed") return error;
  return new AppError("FORBIDDEN", `webhook host ${url.hostname} is not a public address`, {
    cause: error,
    userMessage: `The endpoint's host ${url.hostname} resolves to a private, loopback or link-local address. An operator can allow this exact origin with BERTH_WEBHOOK_ALLOWED_ORIGINS.`,
    details: { reason: "webhook_host_not_allowed", host: url.hostname },
  });
}

function invalid(message: string): AppError {
  return new AppError("BAD_REQUEST", `invalid webhook URL: ${message}`, {
    userMessage: message,
    details: { reason: "webhook_url_invalid" },
  });
}
