import { processBerth } from "@/server/composition/process-berth";
import { routeErrorResponse } from "@/server/api/route-auth";
import { acceptInvite } from "@/server/modules/member/invite.service";
import { AppError } from "@/server/shared/errors";

export const dynamic = "force-dynamic";
export const runtime = "nodejs";

/**
 * POST /api/invitations/accept `{ token, name, email, password }` → `{ tenantSlug, email }`. Public: the
 * person has no account yet; the invitation token is the credential (single use, expiring, stored hashed).
 * The new account then signs in through better-auth's own endpoint.
 */
export async function POST(request: Request): Promise<Response> {
  try {
    const body = await readJsonBody(request);
    const result = await acceptInvite(processBerth().api.auth, body, processBerth().db);
    return Response.json(result, { headers: { "cache-control": "no-store" } });
  } catch (error) {
    return routeErrorResponse(error);
  }
}

/**
 * The body as JSON, decoded strictly: `request.json()` would turn bytes that are not UTF-8 (a lone surrogate
 * sent raw) into U+FFFD and store that. `\u0000` and `\uD800` escapes survive JSON.parse as they are, and
 * acceptInvite refuses them.
 */
async function readJsonBody(request: Request): Promise<unknown> {
  const bytes = new Uint8Array(await request.arrayBuffer());
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw new AppError("BAD_REQUEST", "body is not UTF-8", { userMessage: "Send a UTF-8 JSON body." });
  }
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new AppError("BAD_REQUEST", "body is not JSON", { userMessage: "Send a JSON body." });
  }
}
