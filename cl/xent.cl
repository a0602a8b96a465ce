/* xent.cl - placeholder */
