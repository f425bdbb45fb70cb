import { getApiComposition } from "@/server/api/composition";
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
    const body: unknown = await request.json().catch(() => {
      throw new AppError("BAD_REQUEST", "body is not JSON", { userMessage: "Send a JSON body." });
    });
    const result = await acceptInvite(getApiComposition().auth, body);
    return Response.json(result, { headers: { "cache-control": "no-store" } });
  } catch (error) {
    return routeErrorResponse(error);
  }
}
