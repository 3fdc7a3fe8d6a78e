from fluxgate_es_persister.app import main

main()
