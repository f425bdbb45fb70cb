import { notFound } from "next/navigation";

/** Any path under a tenant that no page handles: the tenant's not-found page, inside the shell. */
export default function MissingTenantPage(): never {
  notFound();
}
