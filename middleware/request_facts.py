"""What the services are told of each request: RequestFacts, gathered once."""

from services import audit


class GatherRequestFacts:
    """Leave in ``req.context.facts`` the RequestFacts every service call of the request
    gets.

    After TokenAuth, which names the caller; before RequireAccess, whose refusals are
    audited, and everything after it. Services see these facts, never the request.
    """

    def process_resource(self, req, resp, resource, params):
        req.context.facts = audit.request_facts(
            req.context.get('client_ip'),
            req.user_agent,
            req.context.get('caller'),
            req.context.get('request_id'),
        )
