import { BASE_PATH } from '../shared/public-api';

/**
 * The path the gateway routes on and the target the inventory gets, in origin form
 * (`/v1/pets?limit=1`), whatever form the client used: an absolute-form target
 * (`GET http://host/v1/pets`, RFC 9112 §3.2.2) is read with the WHATWG URL parser. The path ends
 * at the query or a fragment (which a client should not send, but which names no resource either).
 * The asterisk form (`OPTIONS *`) is a path of its own that no route has. Null for a target that is
 * no URL at all (`GET http://[::1/v1/pets`).
 */
export function parseTarget(target: string): { path: string; originForm: string } | null {
  if (target.startsWith('/') || target === '*') {
    const pathEnd = target.search(/[?#]/);
    return { path: pathEnd === -1 ? target : target.slice(0, pathEnd), originForm: target };
  }
  try {
    const url = new URL(target);
    return { path: url.pathname, originForm: url.pathname + url.search };
  } catch {
    return null;
  }
}

/** Whether a path lies under the API's base path (`/v1` itself included). */
export function isApiPath(path: string): boolean {
  return path === BASE_PATH || path.startsWith(`${BASE_PATH}/`);
}
