/**
 * The theme's inline boot script, in a module WITHOUT "use client" on purpose. Imported from a client
 * module, a server component gets a client reference instead of the string: the RSC payload then says
 * "load these chunks to learn the script's text", and when those chunks arrive after hydration has
 * entered <head> (cached scripts after sign-in, a loaded machine), React suspends inside <head> and its
 * replay of <head> loses its place in the document: it then claims <body>'s children from inside <head>
 * and fails with #418 on the tenant shell's root <div> (issue 12). As a plain string the payload carries
 * the text itself and <head> hydrates without waiting for any chunk.
 */
export const THEME_STORAGE_KEY = "berth-theme";

/**
 * Runs before the first paint (inlined in <head>), so a dark-mode user never sees a white flash:
 * the stored choice, else the system preference, becomes the `dark` class on <html>.
 */
export const THEME_BOOT_SCRIPT = `(function(){try{var c=localStorage.getItem("${THEME_STORAGE_KEY}");var d=c==="dark"||((!c||c==="system")&&matchMedia("(prefers-color-scheme: dark)").matches);document.documentElement.classList.toggle("dark",d)}catch(e){}})();`;
