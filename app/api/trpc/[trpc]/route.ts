import { getApiComposition } from "@/server/api/composition";
import { handleTrpcRequest } from "@/server/api/http-handler";

export const dynamic = "force-dynamic";

function handler(req: Request): Promise<Response> {
  return handleTrpcRequest(req, getApiComposition().runtime);
}

export { handler as GET, handler as POST };
