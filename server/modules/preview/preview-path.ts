import { MAX_TUNNEL_PORT, MIN_TUNNEL_PORT } from "@/server/workspace/gateway/gateway-protocol";

/** The preview URL space on Berth's origin: `/p/<workspaceId>/<port>/<rest>`. */
const PREVIEW_PREFIX = "/p/";
/** The query parameter carrying a share link's token (removed before the request reaches the app). */
const SHARE_PARAM = "berth_share";
/** The path-scoped cookie a share link sets on first use. */
export const SHARE_COOKIE = "berth_preview";

export type PreviewRequestPath = {
  workspaceId: string;
  port: number;
  /** `/<rest>` with the query (minus the share token) as the app inside sees it. */
  upstreamPath: string;
  /** The share token of the query, if any. */
  shareToken: string | null;
  /** Where the share cookie applies: `/p/<workspaceId>/<port>/`. */
  cookiePath: string;
};

const WORKSPACE_ID = /^[A-Za-z0-9_-]{1,200}$/;

export function isPreviewUrl(url: string | undefined): boolean {
  return (url ?? "").startsWith(PREVIEW_PREFIX);
}

/**
 * Parses a request target under /p/, or null when it is not a preview URL Berth serves (bad id, a port
 * outside 1024–65535 or written oddly). `/p/<ws>/<port>` without the slash is answered with a redirect by
 * the caller (`needsSlash`), so relative links in the app resolve under its prefix.
 */
export function parsePreviewPath(target: string): (PreviewRequestPath & { needsSlash: boolean }) | null {
  if (!target.startsWith(PREVIEW_PREFIX)) return null;
  const queryStart = target.indexOf("?");
  const pathname = queryStart === -1 ? target : target.slice(0, queryStart);
  const query = queryStart === -1 ? "" : target.slice(queryStart + 1);
  const [workspaceId = "", portText = "", ...rest] = pathname.slice(PREVIEW_PREFIX.length).split("/");
  if (!WORKSPACE_ID.test(workspaceId) || !/^[1-9]\d{0,4}$/.test(portText)) return null;
  const port = Number(portText);
  if (port < MIN_TUNNEL_PORT || port > MAX_TUNNEL_PORT) return null;
  let shareToken: string | null = null;
  const kept: string[] = [];
  for (const pair of query === "" ? [] : query.split("&")) {
    const name = pair.split("=", 1)[0];
    if (name === SHARE_PARAM) shareToken ??= safeDecode(pair.slice(SHARE_PARAM.length + 1));
    else kept.push(pair);
  }
  return {
    workspaceId,
    port,
    upstreamPath: `/${rest.join("/")}${kept.length > 0 ? `?${kept.join("&")}` : ""}`,
    shareToken,
    cookiePath: `${PREVIEW_PREFIX}${workspaceId}/${port}/`,
    needsSlash: rest.length === 0,
  };
}

/** The preview URL of a port (absolute, on `baseUrl`), with a share token when given. */
export function previewUrl(baseUrl: string, target: { workspaceId: string; port: number }, token?: string) {
  const url = `${baseUrl}${PREVIEW_PREFIX}${target.workspaceId}/${target.port}/`;
  return token ? `${url}?${SHARE_PARAM}=${encodeURIComponent(token)}` : url;
}

/** A malformed escape is an invalid token (""), never an exception. */
function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return "";
  }
}
