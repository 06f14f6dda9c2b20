import express, { type RequestHandler, type Router } from 'express';
import { ApiError } from '../shared/errors';
import { methodNotAllowed, readJsonBody, requireJsonBody } from './middleware';
import { nextPageLink, publicOrigin } from './next-page-link';
import type { PetRepository } from './pet-repository';
import { parseListQuery, parseNewPet, parsePetId } from './validation';

/** The router's paths, in express syntax; metrics and logs label requests with these templates. */
export const PETS_ROUTE_PATHS = ['/pets', '/pets/:petId'] as const;
const [collectionPath, itemPath] = PETS_ROUTE_PATHS;

/** `/pets` and `/pets/{petId}`, mounted under /v1 behind the gateway-token check. */
export function createPetsRouter(repository: PetRepository, maxBodyBytes: () => number): Router {
  const listPets: RequestHandler = (req, res) => {
    const queryStart = req.originalUrl.indexOf('?');
    const params = parseListQuery(queryStart === -1 ? '' : req.originalUrl.slice(queryStart + 1));
    // One row more than asked tells whether another page follows without a COUNT.
    const rows = repository.list({ afterId: params.afterId, limit: params.limit + 1, status: params.status });
    const page = rows.slice(0, params.limit);
    const last = page.at(-1);
    if (rows.length > params.limit && last)
      res.setHeader('Link', nextPageLink(publicOrigin(req.headers), params, last.id));
    res.json(page);
  };

  const createPet: RequestHandler = (req, res) => {
    const pet = repository.create(parseNewPet(req.body));
    // create() returns after the commit, so the 201 never acknowledges a row that could be lost.
    res.status(201).setHeader('Location', `/v1/pets/${pet.id}`);
    res.json(pet);
  };

  const getPet: RequestHandler<{ petId: string }> = (req, res) => {
    const id = parsePetId(req.params.petId);
    const pet = repository.findById(id);
    if (!pet) throw new ApiError('not_found', `No pet with id ${id}.`);
    res.json(pet);
  };

  const router = express.Router({ caseSensitive: true, strict: true });
  // Express answers HEAD with the GET handler, so HEAD is listed wherever GET is.
  router
    .route(collectionPath)
    .get(listPets)
    .post(requireJsonBody, ...readJsonBody(maxBodyBytes), createPet)
    .all(methodNotAllowed(['GET', 'HEAD', 'POST']));
  router
    .route(itemPath)
    .get(getPet)
    .all(methodNotAllowed(['GET', 'HEAD']));
  return router;
}
