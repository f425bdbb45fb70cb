import { processApiRuntime } from "@/server/api/composition";
import { handleTrpcRequest } from "@/server/api/http-handler";

export const dynamic = "force-dynamic";

function handler(req: Request): Promise<Response> {
  return handleTrpcRequest(req, processApiRuntime());
}

export { handler as GET, handler as POST };
