// Sign-out, routing on the hash, and the first page.
// Part of app.js: the parts are joined in order (src/dashboard/mod.rs).

// ---- start --------------------------------------------------------------------------

document.getElementById('sign-out').addEventListener('click', () => {
  sessionStorage.removeItem(TOKEN_KEY);
  me = null;
  location.hash = '#/';
  route();
});
window.addEventListener('hashchange', () => { flash(''); route(); });
route();
