import { Brand } from "@/app/_components/brand";
import { NotFoundView } from "@/app/_components/not-found-view";

/** Unknown tenants (or tenants the user is not in, the same answer) and unknown top-level paths. */
export default function NotFound() {
  return (
    <div className="min-h-screen">
      <header className="flex h-14 items-center border-b px-4 sm:px-6">
        <Brand />
      </header>
      <main className="mx-auto max-w-6xl px-4">
        <NotFoundView backHref="/" backLabel="Go to your tenant" />
      </main>
    </div>
  );
}
